"""Answers LLM calls from a run's records, so a run can be re-run and tested with no model at all.

A run keeps every call in ``<run_dir>/llm/`` (planner and critic alike, numbered in call order). The
n-th call of an agent gets the n-th recorded answer of that agent; skills and trainings run live, so a
prompt may differ from the recorded one (a measured success rate, a training curve): that is counted
and logged, not refused. A call the record does not hold is an error that names it.

Two ways in: ``ReplayClient`` in-process (tests, benchmarks), and ``ReplayAnswerer`` behind the
OpenAI-compatible ``ChatServer`` (``rlgpt run --replay``, where the planner and the critic are
separate processes that only know a base URL).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter, defaultdict, deque
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from rlgpt.errors import FailedPrecondition
from rlgpt.llm.chat_server import ChatRequest, ChatServerError
from rlgpt.llm.client import CallRecord, StructuredOutputError, TokenLedger, write_record

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
_RECORD_KEYS = ("agent", "messages", "response", "parsed")


class RecordedCalls:
    """A run's recorded calls, queued per agent in call order; thread-safe."""

    def __init__(self, source_dir: Path):
        self.source_dir = source_dir
        self._queues: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self._lock = threading.Lock()
        self.taken: Counter[str] = Counter()
        self.same_prompt = 0
        if not source_dir.is_dir():
            raise FailedPrecondition(f"no LLM records to replay: {source_dir} is not a directory (a run keeps "
                                     "its calls in <run_dir>/llm/)")
        files = sorted(source_dir.glob("*.json"))
        if not files:
            raise FailedPrecondition(f"no LLM records in {source_dir}: nothing to replay")
        for path in files:
            try:
                doc = json.loads(path.read_text())
                missing = [k for k in _RECORD_KEYS if k not in doc] if isinstance(doc, dict) else ["(an object)"]
                if missing:
                    raise ValueError(f"missing {', '.join(missing)}")
            except ValueError as exc:
                raise FailedPrecondition(f"LLM record {path} is corrupt ({str(exc)[:200]}); remove it or "
                                         "re-record the run") from None
            doc["_file"] = path.name
            self._queues[doc["agent"]].append(doc)
        self.total = len(files)

    def take(self, agent: str, messages: list[dict[str, Any]], iteration: int | None = None) -> dict[str, Any]:
        """The next recorded call of ``agent``; FailedPrecondition naming the call when there is none."""
        with self._lock:
            queue = self._queues.get(agent)
            if not queue:
                held = ", ".join(f"{a}: {self.taken[a] + len(q)}" for a, q in sorted(self._queues.items()))
                where = f" in iteration {iteration}" if iteration is not None else ""
                first = str(messages[0].get("content", ""))[:120].replace("\n", " ") if messages else ""
                raise FailedPrecondition(
                    f"the replay of {self.source_dir} holds {self.taken[agent]} {agent!r} call(s) and this run asks "
                    f"for call {self.taken[agent] + 1}{where} (prompt starts {first!r}); recorded calls per agent: "
                    f"{held or 'none'}. The run took another path than the recorded one.")
            doc = queue.popleft()
            self.taken[agent] += 1
            if doc["messages"][:1] == messages[:1]:
                self.same_prompt += 1
            else:
                log.info("replayed %s call %s had a different prompt than recorded", agent, doc["_file"])
        return doc

    def left(self) -> dict[str, int]:
        with self._lock:
            return {agent: len(q) for agent, q in self._queues.items() if q}

    def summary(self) -> str:
        taken = sum(self.taken.values())
        left = self.left()
        unused = f"; unused: {', '.join(f'{a} {n}' for a, n in sorted(left.items()))}" if left else ""
        return (f"replayed {taken} of {self.total} recorded LLM calls from {self.source_dir} "
                f"({self.same_prompt} with the recorded prompt{unused})")


class ReplayClient:
    """Same interface as LLMClient.complete, answered from a run's records."""

    def __init__(self, source_dir: Path, *, record_dir: Path | None = None, ledger: TokenLedger | None = None):
        self.model = "replay"
        self.record_dir = record_dir
        self.ledger = ledger or TokenLedger()
        self.calls = RecordedCalls(source_dir)
        self._seq = 0

    def complete(self, agent: str, messages: list[dict[str, str]], schema: type[T], *, iteration: int = 0,
                 validate: Any = None, seed: int | None = None) -> tuple[T, CallRecord]:
        doc = self.calls.take(agent, messages, iteration)
        self._seq += 1
        record = CallRecord(seq=self._seq, agent=agent, iteration=iteration, model=self.model, messages=messages,
                            response=doc["response"], parsed=doc["parsed"], prompt_tokens=doc.get("prompt_tokens", 0),
                            completion_tokens=doc.get("completion_tokens", 0),
                            latency_seconds=0.0, attempts=doc.get("attempts", 1), error=doc.get("error", ""))
        write_record(self.record_dir, record)
        self.ledger.add(record)
        if doc["parsed"] is None:
            raise StructuredOutputError(f"{agent} agent (replayed): {doc.get('error') or 'invalid answer'}", record)
        answer = schema.model_validate(doc["parsed"])
        if validate is not None:
            validate(answer)
        return answer, record


class ReplayAnswerer:
    """Answers ChatServer requests from records: the agent comes from rlgpt's client header, and a repair
    attempt or a retry of the same call gets the same recorded answer again."""

    def __init__(self, source_dir: Path):
        self.calls = RecordedCalls(source_dir)
        self._by_call: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def answer(self, request: ChatRequest) -> str:
        if not request.agent:
            raise ChatServerError(400, "a replay needs to know which agent calls: rlgpt's LLM client sends the "
                                       "X-RLGPT-Agent header; other clients cannot be replayed")
        with self._lock:
            doc = self._by_call.get(request.call_id) if request.call_id else None
        if doc is None:
            try:
                doc = self.calls.take(request.agent, request.messages)
            except FailedPrecondition as exc:
                raise ChatServerError(409, str(exc)) from None
            if request.call_id:
                with self._lock:
                    self._by_call[request.call_id] = doc
        return doc["response"]
