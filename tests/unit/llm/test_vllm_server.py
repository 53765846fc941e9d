"""The vLLM server's command line, its settings, and the errors met before `make vllm-setup` ran."""

from __future__ import annotations

import json
import sys

import pytest

from rlgpt.errors import ConfigError, FailedPrecondition, Unavailable
from rlgpt.llm import vllm_server
from rlgpt.llm.local_server import ServerProcess
from rlgpt.llm.vllm_server import API_SERVER, ROOT, VllmServer, VllmSettings, client_settings, vllm_command


def _flags(command: list[str]) -> dict[str, str]:
    return dict(zip(command[3::2], command[4::2], strict=True))


def test_command_has_every_flag_the_server_needs() -> None:
    settings = VllmSettings(kv_cache_bytes="2G", max_model_len=4096, extra_args="--enforce-eager --seed 3")
    command = vllm_command(settings, "127.0.0.1", 8123)
    assert command[:3] == [str(ROOT / ".venv-vllm/bin/python"), "-m", API_SERVER]
    assert command[-3:] == ["--enforce-eager", "--seed", "3"]
    flags = _flags(command[:-3])
    assert flags == {
        "--model": str(ROOT / ".cache/vllm-models/gemma3-270m"), "--served-model-name": "gemma3-270m",
        "--host": "127.0.0.1", "--port": "8123",
        "--chat-template": str(ROOT / "deploy/vllm/gemma3-chat-template.jinja"), "--kv-cache-memory-bytes": "2G",
        "--max-model-len": "4096", "--dtype": "bfloat16",
        "--structured-outputs-config": json.dumps({"backend": "xgrammar", "disable_any_whitespace": True})}
    assert (ROOT / flags["--chat-template"]).is_file()


def test_absolute_paths_and_image_paths_are_kept(tmp_path) -> None:
    settings = VllmSettings(venv=str(tmp_path / "v"), model_dir=str(tmp_path / "m"))
    local = vllm_command(settings, "0.0.0.0", 8000)
    assert local[0] == str(tmp_path / "v/bin/python") and _flags(local)["--model"] == str(tmp_path / "m")
    image = vllm_command(settings, "0.0.0.0", 8000, python="python", model_dir="/opt/models/x",
                         chat_template="/t.jinja")
    assert image[0] == "python" and _flags(image)["--model"] == "/opt/models/x"
    assert _flags(image)["--chat-template"] == "/t.jinja"


def test_settings_come_from_the_environment() -> None:
    settings = VllmSettings.load(environ={"RLGPT_VLLM_SERVED_MODEL_NAME": "g", "RLGPT_VLLM_MAX_MODEL_LEN": "2048"})
    assert settings.served_model_name == "g" and settings.max_model_len == 2048
    with pytest.raises(ConfigError, match="max_model_len=100: must be >= 512"):
        VllmSettings.load(environ={"RLGPT_VLLM_MAX_MODEL_LEN": "100"})
    assert client_settings(settings, "http://127.0.0.1:1/v1") == {
        "RLGPT_LLM_BASE_URL": "http://127.0.0.1:1/v1", "RLGPT_LLM_MODEL": "g", "RLGPT_LLM_STRUCTURED": "json_schema"}


def test_missing_venv_and_model_name_the_make_target(tmp_path) -> None:
    settings = VllmSettings(venv=str(tmp_path / "none"), model_dir=str(tmp_path / "model"))
    with pytest.raises(FailedPrecondition) as caught:
        VllmServer(settings)
    message = str(caught.value)
    assert f"{tmp_path / 'none/bin/python'} not found" in message and "numpy>=2" in message
    assert f"no converted model in {tmp_path / 'model'}" in message
    assert message.count("`make vllm-setup`") == 2


def test_main_without_venv_exits_2_with_the_make_target(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("RLGPT_VLLM_VENV", str(tmp_path / "none"))
    with pytest.raises(SystemExit) as caught:
        vllm_server.main([])
    assert caught.value.code == 2
    assert "make vllm-setup" in capsys.readouterr().err


def _fake_setup(tmp_path, script: str) -> VllmSettings:
    """A venv whose `python` runs a small script whatever its arguments, and a model folder with a config.json."""
    (tmp_path / "venv/bin").mkdir(parents=True)
    python = tmp_path / "venv/bin/python"
    python.write_text(f"#!{sys.executable}\n{script}")
    python.chmod(0o755)
    (tmp_path / "model").mkdir()
    (tmp_path / "model/config.json").write_text("{}")
    return VllmSettings(venv=str(tmp_path / "venv"), model_dir=str(tmp_path / "model"), start_seconds=20)


def test_a_server_that_dies_while_starting_reports_its_log(tmp_path) -> None:
    settings = _fake_setup(tmp_path, "import sys\nprint('ValueError: no such dtype')\nsys.exit(3)\n")
    server = VllmServer(settings, log_path=tmp_path / "vllm.log")
    with pytest.raises(Unavailable, match=r"(?s)vLLM server exited with code 3 while starting.*no such dtype"):
        server.start()


def test_a_server_that_answers_models_is_ready_and_stops(tmp_path) -> None:
    # The fake serves /v1/models on the --port it was given, like vLLM once its model is loaded.
    settings = _fake_setup(tmp_path, (
        "import http.server, sys\n"
        "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'{\"data\": []}')\n"
        "http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()\n"))
    with VllmServer(settings, log_path=tmp_path / "vllm.log") as server:
        assert isinstance(server, ServerProcess) and server.started_seconds > 0
        assert server.client_settings()["RLGPT_LLM_BASE_URL"] == f"http://127.0.0.1:{server.port}/v1"
        process = server._process
        assert process is not None and process.poll() is None
    assert process.poll() is not None
