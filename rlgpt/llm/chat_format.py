"""Which chat template the embedded llama.cpp server applies, decided here and said out loud.

llama.cpp turns the chat messages into one prompt with a template. When a GGUF file carries one
(``tokenizer.chat_template``, e.g. SmolLM2-135M-Instruct's ChatML) it is the right one. When it carries
none (the packaged Gemma 3 270M is the base model: no template), llama-cpp-python silently falls back
to Llama 2's ``[INST]`` format, which no Gemma saw in training. So ``auto`` picks the model family's own
format from the file's architecture, and a file with neither fails to start with a message that says
which setting to set. The vLLM server has the same rule in its own setting (a Jinja template file).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rlgpt.errors import ConfigError, FailedPrecondition

log = logging.getLogger(__name__)
AUTO = "auto"
FILE_TEMPLATE = "file"
# The family's own turn format for GGUF files that carry no template, by general.architecture.
FAMILY_FORMATS = {"gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma", "qwen2": "chatml"}


def gguf_metadata(model_file: Path) -> dict[str, Any]:
    """The GGUF file's key-value metadata (vocabulary only is loaded: well under a second)."""
    from llama_cpp import Llama  # the embedded server's package; only needed when it runs

    return dict(Llama(model_path=str(model_file), vocab_only=True, verbose=False).metadata)


def known_formats() -> list[str]:
    """llama-cpp-python's registered chat formats."""
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    return sorted(LlamaChatCompletionHandlerRegistry()._chat_handlers)


def choose(setting: str, metadata: dict[str, Any]) -> tuple[str | None, str]:
    """(``--chat_format`` value or None for the file's own template, why) for a setting and the file's metadata."""
    if setting == FILE_TEMPLATE or (setting == AUTO and metadata.get("tokenizer.chat_template")):
        if not metadata.get("tokenizer.chat_template"):
            raise FailedPrecondition("RLGPT_LLM_LOCAL_CHAT_FORMAT=file but the model file carries no chat template "
                                     "(tokenizer.chat_template); set a llama.cpp chat format such as gemma or chatml")
        return None, "the model file's own chat template (tokenizer.chat_template)"
    if setting != AUTO:
        return setting, f"RLGPT_LLM_LOCAL_CHAT_FORMAT={setting}"
    architecture = str(metadata.get("general.architecture", ""))
    family = FAMILY_FORMATS.get(architecture)
    if family is None:
        raise FailedPrecondition(f"the model file carries no chat template and its architecture {architecture[:40]!r} "
                                 "has no known turn format; set RLGPT_LLM_LOCAL_CHAT_FORMAT to a llama.cpp chat "
                                 "format (e.g. chatml, gemma, llama-3)")
    return family, f"the {architecture} family's format (the file carries no chat template)"


def chat_format(setting: str, model_file: Path) -> str | None:
    """The ``--chat_format`` the server gets for ``model_file`` (None: the file's own template); logs the choice."""
    if setting not in (AUTO, FILE_TEMPLATE):
        formats = known_formats()
        if setting not in formats:
            raise ConfigError([f"RLGPT_LLM_LOCAL_CHAT_FORMAT={setting[:40]!r} is not a llama.cpp chat format; "
                               f"use auto, file or one of: {', '.join(formats)}"])
    metadata = gguf_metadata(model_file)
    chosen, why = choose(setting, metadata)
    log.info("embedded LLM %s (%s): chat format %s: %s", model_file.name, metadata.get("general.name", "?"),
             chosen or "from the file", why)
    return chosen
