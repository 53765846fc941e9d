"""How the LLM client retries, and so the longest one of its calls may take: the schedule
:class:`~rlgpt.llm.client.LLMClient` follows, and the bound every deadline over an LLM call is derived from
(:mod:`rlgpt.deadlines`)."""

from __future__ import annotations

from rlgpt.config import LLMSettings

MAX_BACKOFF_SECONDS = 30.0
"""The longest sleep before one retry."""
ANSWER_ATTEMPTS = 2
"""Requests for one answer: the answer, then one repair quoting its validation error."""


def retry_delays(settings: LLMSettings) -> list[float]:
    """The sleeps before each retry of one request (``max_retries`` of them): doubling from ``backoff_seconds``,
    capped at :data:`MAX_BACKOFF_SECONDS`."""
    delays, delay = [], settings.backoff_seconds
    for _ in range(settings.max_retries):
        delays.append(delay)
        delay = min(MAX_BACKOFF_SECONDS, max(delay * 2, 0.05))
    return delays


def longest_call_seconds(settings: LLMSettings) -> float:
    """The longest one :meth:`~rlgpt.llm.client.LLMClient.complete` may take with ``settings``: each of its answer
    attempts sends up to ``max_retries + 1`` requests of ``timeout_seconds`` each, with the retry delays between
    them."""
    one_answer = (settings.max_retries + 1) * settings.timeout_seconds + sum(retry_delays(settings))
    return ANSWER_ATTEMPTS * one_answer
