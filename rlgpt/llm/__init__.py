"""One client for every OpenAI-compatible LLM server: structured output, retries, accounting, record/replay."""

from rlgpt.llm.client import CallRecord, LLMClient, LLMError, StructuredOutputError, TokenLedger
from rlgpt.llm.replay import ReplayClient

__all__ = ["CallRecord", "LLMClient", "LLMError", "ReplayClient", "StructuredOutputError", "TokenLedger"]
