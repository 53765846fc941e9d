"""An LLM client with Prometheus metering: every agent call timed, every failed one counted."""

from __future__ import annotations

import time
from typing import Any

from rlgpt import metrics
from rlgpt.llm.client import CallRecord
from rlgpt.prompts import CompletesJSON

AGENTS = ("slow", "fast")
"""The agents whose series exist from the first scrape (the planner's slow and fast agents)."""


class MeteredLLM:
    """Wraps an LLM client: every agent call is timed and every failed one counted (``rlgpt_planner_llm_*``)."""

    def __init__(self, llm: CompletesJSON, agents: tuple[str, ...] = AGENTS):
        self.llm = llm
        for agent in agents:
            # Every series exists at 0 from the start, so rate() and increase() see the first call too.
            metrics.PLANNER_LLM_SECONDS.labels(agent)
            for kind in ("prompt", "completion"):
                metrics.PLANNER_LLM_TOKENS.labels(agent, kind)

    @property
    def model(self) -> str:
        """The wrapped client's model name ("" when it has none)."""
        return str(getattr(self.llm, "model", "") or "")

    def complete(self, agent: str, messages: list[dict[str, str]], schema: type[Any], *, iteration: int = 0,
                 validate: Any = None, seed: int | None = None) -> tuple[Any, CallRecord]:
        start = time.perf_counter()
        try:
            return self.llm.complete(agent, messages, schema, iteration=iteration, validate=validate, seed=seed)
        except Exception as exc:
            metrics.PLANNER_LLM_ERRORS.labels(agent, type(exc).__name__).inc()
            raise
        finally:
            metrics.PLANNER_LLM_SECONDS.labels(agent).observe(time.perf_counter() - start)
