"""The vLLM server's command line, its settings, and the errors met before `make vllm-setup` ran."""

from __future__ import annotations

import json

import pytest

from rlgpt.errors import ConfigError, FailedPrecondition
from rlgpt.llm import vllm_server
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


