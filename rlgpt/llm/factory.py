"""Builds the configured LLM client: OpenAI, any OpenAI-compatible URL, or the embedded local server."""

from __future__ import annotations

import os
from pathlib import Path

from rlgpt.config import LLMSettings
from rlgpt.llm.client import LLMClient, TokenLedger
from rlgpt.llm.local_server import MODEL_ALIAS, LocalLLMServer

EMBEDDED_MAX_TOKENS = 1024
"""The most completion tokens one call to the embedded server asks for: its context is 8,192 tokens (local_context)
and the agents' prompts take most of it; its small models' answers (programs, plans) are short."""

def needs_local_server(settings: LLMSettings) -> bool:
    return not settings.base_url and not os.environ.get(settings.api_key_env)


def local_timeout(settings: LLMSettings) -> float:
    """The timeout of one request to the embedded server (see ``LLMSettings.local_timeout_seconds``)."""
    return max(settings.timeout_seconds, settings.local_timeout_seconds)


def embedded_env(settings: LLMSettings, base_url: str) -> dict[str, str]:
    """The LLM settings of the services that talk to the embedded server at ``base_url`` (environment variables)."""
    return {"RLGPT_LLM_BASE_URL": base_url, "RLGPT_LLM_MODEL": MODEL_ALIAS, "RLGPT_LLM_STRUCTURED": "json_object",
            "RLGPT_LLM_TIMEOUT_SECONDS": str(local_timeout(settings)),
            "RLGPT_LLM_MAX_TOKENS": str(embedded_max_tokens(settings))}


def embedded_max_tokens(settings: LLMSettings) -> int:
    """Completion tokens per call to the embedded server: the setting, at most :data:`EMBEDDED_MAX_TOKENS`."""
    return min(settings.max_tokens, EMBEDDED_MAX_TOKENS)


def make_client(settings: LLMSettings, *, record_dir: Path | None = None, ledger: TokenLedger | None = None,
                log_dir: Path | None = None) -> tuple[LLMClient, LocalLLMServer | None]:
    """The client, plus the embedded server it talks to when one had to be started (caller stops it)."""
    if not needs_local_server(settings):
        return LLMClient(settings, record_dir=record_dir, ledger=ledger), None
    server = LocalLLMServer(settings, log_path=(log_dir / "llm-server.log") if log_dir else None).start()
    try:
        local = LLMSettings(**{**settings.__dict__, "model": MODEL_ALIAS, "timeout_seconds": local_timeout(settings),
                               "max_tokens": embedded_max_tokens(settings)})
        # llama.cpp's server takes a schema with response_format json_object and turns it into a grammar.
        client = LLMClient(local, base_url=server.base_url, record_dir=record_dir, ledger=ledger,
                           structured="json_object")
    except BaseException:
        server.stop()
        raise
    return client, server
