"""The llama.cpp server command shared by the embedded server and the LLM image, and its model file."""

from __future__ import annotations

import sys

import pytest

from rlgpt.config import LLMSettings
from rlgpt.errors import FailedPrecondition
from rlgpt.llm.local_server import MODEL_ALIAS, resolve_model_file, server_command


def test_server_command_flags(tmp_path) -> None:
    settings = LLMSettings(local_context=4096, local_threads=3)
    command = server_command(settings, tmp_path / "m.gguf", "0.0.0.0", 8080)
    assert command[:3] == [sys.executable, "-m", "llama_cpp.server"]
    flags = dict(zip(command[3::2], command[4::2], strict=True))
    assert flags == {"--model": str(tmp_path / "m.gguf"), "--model_alias": MODEL_ALIAS, "--host": "0.0.0.0",
                     "--port": "8080", "--n_ctx": "4096", "--n_threads": "3"}


def test_model_file_setting_wins_and_must_exist(tmp_path) -> None:
    model = tmp_path / "model.gguf"
    with pytest.raises(FailedPrecondition, match="no such file"):
        resolve_model_file(LLMSettings(local_model_file=str(model)))
    model.write_bytes(b"GGUF")
    assert resolve_model_file(LLMSettings(local_model_file=str(model))) == model


def test_chat_format_flag_is_added_only_when_chosen(tmp_path) -> None:
    command = server_command(LLMSettings(), tmp_path / "m.gguf", "127.0.0.1", 1, chat_format="gemma")
    assert command[-2:] == ["--chat_format", "gemma"]
    assert "--chat_format" not in server_command(LLMSettings(), tmp_path / "m.gguf", "127.0.0.1", 1, None)
