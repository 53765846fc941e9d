"""Answers LLM calls from a run's records, so a run can be re-run and tested with no server."""

from __future__ import annotations

import json
import logging
from collections import defaultdict, deque
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from rlgpt.errors import FailedPrecondition
from rlgpt.llm.client import CallRecord, StructuredOutputError, TokenLedger, write_record

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)


class ReplayClient:
    """Same interface as LLMClient.complete; the n-th call of an agent gets the n-th recorded answer."""

    def __init__(self, source_dir: Path, *, record_dir: Path | None = None, ledger: TokenLedger | None = None):
        self.model = "replay"
        self.record_dir = record_dir
        self.ledger = ledger or TokenLedger()
        self._queues: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        files = sorted(source_dir.glob("*.json"))
        if not files:
            raise FailedPrecondition(f"no LLM records in {source_dir}: nothing to replay")
        for path in files:
            try:
                doc = json.loads(path.read_text())
                self._queues[doc["agent"]].append(doc)
            except (ValueError, KeyError) as exc:
                raise FailedPrecondition(f"LLM record {path} is corrupt ({exc}); remove it or re-record") from exc
        self._seq = 0

    def complete(self, agent: str, messages: list[dict[str, str]], schema: type[T], *, iteration: int = 0,
                 validate: Any = None) -> tuple[T, CallRecord]:
        queue = self._queues.get(agent)
        if not queue:
            raise FailedPrecondition(f"the replay has no more recorded {agent!r} calls")
        doc = queue.popleft()
        if doc["messages"][: len(messages)] != messages:
            log.warning("replayed %s call %d had a different prompt; answering with the record anyway",
                        agent, doc["seq"])
        if doc.get("parsed") is None:
            raise StructuredOutputError(f"{agent} agent (replayed): {doc.get('error', 'invalid answer')}")
        answer = schema.model_validate(doc["parsed"])
        if validate is not None:
            validate(answer)
        self._seq += 1
        record = CallRecord(seq=self._seq, agent=agent, iteration=iteration, model=self.model, messages=messages,
                            response=doc["response"], parsed=doc["parsed"], prompt_tokens=doc["prompt_tokens"],
                            completion_tokens=doc["completion_tokens"], latency_seconds=0.0, attempts=1)
        write_record(self.record_dir, record)
        self.ledger.add(record)
        return answer, record
