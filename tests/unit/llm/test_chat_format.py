"""The embedded server's chat template: decided from the packaged GGUF files' own metadata, never left
to llama-cpp-python's silent Llama 2 fallback."""

from __future__ import annotations

import importlib.util

import pytest

from rlgpt.errors import ConfigError, FailedPrecondition
from rlgpt.llm import chat_format as cf
from rlgpt.llm.local_server import model_path

needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                 reason="llama-cpp-python is installed by make setup")


@needs_llama
def test_packaged_gemma_is_the_base_model_without_a_template_and_gets_gemma_turns() -> None:
    metadata = cf.gguf_metadata(model_path("gemma3"))
    assert metadata["general.architecture"] == "gemma3"
    assert "tokenizer.chat_template" not in metadata  # the base model: README says so
    assert cf.chat_format("auto", model_path("gemma3")) == "gemma"


@needs_llama
def test_packaged_smollm2_keeps_its_own_chatml_template() -> None:
    metadata = cf.gguf_metadata(model_path("smollm2"))
    assert "<|im_start|>" in metadata["tokenizer.chat_template"]
    assert cf.chat_format("auto", model_path("smollm2")) is None
    assert cf.chat_format("file", model_path("smollm2")) is None


@needs_llama
def test_an_explicit_format_wins_and_an_unknown_one_lists_the_known() -> None:
    assert cf.chat_format("chatml", model_path("gemma3")) == "chatml"
    with pytest.raises(ConfigError, match=r"not a llama\.cpp chat format.*gemma"):
        cf.chat_format("gemma-9000", model_path("gemma3"))


def test_file_without_template_or_known_family_says_what_to_set() -> None:
    with pytest.raises(FailedPrecondition, match="RLGPT_LLM_LOCAL_CHAT_FORMAT"):
        cf.choose("auto", {"general.architecture": "mamba"})
    with pytest.raises(FailedPrecondition, match="carries no chat template"):
        cf.choose("file", {"general.architecture": "gemma3"})
    assert cf.choose("auto", {"general.architecture": "gemma2"})[0] == "gemma"
