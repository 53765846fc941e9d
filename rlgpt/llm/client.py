"""The LLM client: pydantic-typed answers from any OpenAI-compatible server.

Every call: the answer's pydantic model goes out as a JSON schema (``response_format`` json_schema,
or json_object plus schema for llama.cpp's server), the text that comes back is parsed leniently
(code fences stripped, control characters inside strings tolerated) and validated; an invalid
answer gets one repair attempt that quotes the validation error; then a clear StructuredOutputError.
429, 5xx, timeouts and connection errors are retried with exponential backoff a bounded number of
times. Each call's messages, answer, tokens and latency are recorded in the run directory.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from rlgpt.config import LLMSettings
from rlgpt.errors import FailedPrecondition, RlgptError, Unavailable
from rlgpt.llm import cancel
from rlgpt.llm.chat_server import AGENT_HEADER, ATTEMPT_HEADER, CALL_HEADER
from rlgpt.llm.retries import ANSWER_ATTEMPTS, retry_delays
from rlgpt.text import encodable_tree

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class LLMError(RlgptError):
    """The LLM could not give a usable answer (server unreachable, model unknown, answers invalid)."""


class StructuredOutputError(LLMError):
    """The answer did not match the schema, even after one repair attempt; ``record`` is the failed call."""

    def __init__(self, message: str, record: CallRecord | None = None):
        super().__init__(message)
        self.record = record


@dataclasses.dataclass
class CallRecord:
    """What one agent call cost and said (a run keeps its calls in ``<run_dir>/llm/``)."""

    seq: int
    agent: str
    iteration: int
    model: str
    messages: list[dict[str, str]]
    response: str
    parsed: dict[str, Any] | None
    prompt_tokens: int
    completion_tokens: int
    latency_seconds: float
    attempts: int
    error: str = ""
    path: str = ""


class TokenLedger:
    """Token and latency totals per agent and per iteration (the paper reports tokens per iteration)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_agent: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.by_iteration: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def add(self, record: CallRecord) -> None:
        with self._lock:
            for table, key in ((self.by_agent, record.agent), (self.by_iteration, record.iteration)):
                row = table[key]
                row["calls"] += 1
                row["prompt_tokens"] += record.prompt_tokens
                row["completion_tokens"] += record.completion_tokens
                row["seconds"] += record.latency_seconds

    def total_tokens(self) -> int:
        with self._lock:
            return int(sum(r["prompt_tokens"] + r["completion_tokens"] for r in self.by_agent.values()))


_GRAMMAR_HEAVY = {"maxLength", "minLength", "pattern"}
_MAX_SENT_LENGTH = 256  # a larger maxLength is left to pydantic: a grammar that long is slow to build


def server_schema(schema: type[BaseModel], *, keep_limits: bool = True) -> dict[str, Any]:
    """The schema sent to the server: shape, types, enums and, with ``keep_limits``, the string limits a
    grammar can carry (patterns, minLength, maxLength up to 256).

    Without them a constrained decoder is free to write ``{"name": ", "}``, as vLLM with a small model did. But
    llama.cpp turns ``maxLength: 1200`` into a 1200-deep nested grammar it cannot parse (and its server dies),
    so ``json_object`` mode sends no string limits. Pydantic enforces every limit on the answer either way, and
    the repair attempt quotes a violation.
    """

    def sent(key: str, value: Any) -> bool:
        if key not in _GRAMMAR_HEAVY:
            return True
        return keep_limits and (key != "maxLength" or (isinstance(value, int) and value <= _MAX_SENT_LENGTH))

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if sent(k, v)}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return strip(schema.model_json_schema())


def parse_json_leniently(text: str) -> Any:
    """JSON from a model's text: code fences stripped, raw control characters inside strings allowed. Every string of
    it is sendable (a model may write a lone surrogate, ``"\\ud800"``, which no proto field can hold); an answer
    nested too deeply is a ValueError, as invalid as any other."""
    match = _FENCE.match(text)
    if match:
        text = match.group(1)
    text = text.strip()
    if not text:
        raise ValueError("the answer was empty")
    try:
        try:
            return encodable_tree(json.loads(text, strict=False))
        except json.JSONDecodeError:
            # Small models often wrap the object in prose: take the outermost {...}.
            start, end = text.find("{"), text.rfind("}")
            if 0 <= start < end:
                return encodable_tree(json.loads(text[start:end + 1], strict=False))
            raise
    except RecursionError:
        raise ValueError("the answer is nested too deeply") from None


class LLMClient:
    """Typed calls to one OpenAI-compatible server; thread-safe."""

    def __init__(self, settings: LLMSettings, *, base_url: str | None = None, record_dir: Path | None = None,
                 ledger: TokenLedger | None = None, structured: str | None = None):
        self.settings = settings
        self.base_url = base_url or settings.base_url or None
        api_key = os.environ.get(settings.api_key_env, "")
        if not api_key and self.base_url is None:
            raise FailedPrecondition(f"no LLM configured: set {settings.api_key_env} for OpenAI, or "
                                     "RLGPT_LLM_BASE_URL for vLLM or another server, or use the embedded server")
        self.model = settings.model or ("gpt-4o-mini" if self.base_url is None else "local")
        self.structured = structured or (settings.structured if settings.structured != "auto" else "json_schema")
        # The SDK's own retries are off: ours are bounded, logged and counted.
        self._client = openai.OpenAI(base_url=self.base_url, api_key=api_key or "not-needed",
                                     timeout=settings.timeout_seconds, max_retries=0)
        self.record_dir = record_dir
        self.ledger = ledger or TokenLedger()
        self._seq = 0
        self._lock = threading.Lock()

    def _next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def _response_format(self, schema: type[BaseModel]) -> dict[str, Any]:
        if self.structured == "json_object":
            return {"type": "json_object", "schema": server_schema(schema, keep_limits=False)}
        return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": server_schema(schema)}}

    def _create(self, messages: list[dict[str, str]], schema: type[BaseModel], headers: dict[str, str],
                seed: int | None = None) -> Any:
        delays = retry_delays(self.settings)
        attempts = len(delays) + 1
        for attempt in range(1, attempts + 1):
            try:
                return cancel.call(lambda: self._client.chat.completions.create(
                    model=self.model, messages=messages, max_tokens=self.settings.max_tokens,
                    temperature=self.settings.temperature, response_format=self._response_format(schema),
                    extra_headers=headers, **({"seed": seed} if seed is not None else {})))
            except openai.NotFoundError as exc:
                raise LLMError(f"model {self.model!r} is not served at {self._where()} (HTTP 404: "
                               f"{_short(exc)}); set RLGPT_LLM_MODEL to a model the server lists") from None
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise LLMError(f"the LLM server at {self._where()} refused the API key from "
                               f"${self.settings.api_key_env} ({_short(exc)})") from None
            except openai.BadRequestError as exc:
                raise LLMError(f"the LLM server at {self._where()} rejected the request: {_short(exc)}") from None
            except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                    openai.APIConnectionError, openai.APIStatusError) as exc:
                if isinstance(exc, openai.APIStatusError) and exc.status_code < 500 and exc.status_code != 429:
                    raise LLMError(f"the LLM server at {self._where()} answered HTTP {exc.status_code}: "
                                   f"{_short(exc)}") from None
                if attempt == attempts:
                    kind = type(exc).__name__
                    raise Unavailable(f"the LLM server at {self._where()} failed {attempts} times ({kind}: "
                                      f"{_short(exc)}); check that it runs and is reachable") from None
                delay = delays[attempt - 1]
                log.warning("LLM call failed (%s: %s); retry %d/%d in %.1f s", type(exc).__name__, _short(exc),
                            attempt, attempts - 1, delay)
                cancel.sleep(delay)
        raise AssertionError("unreachable")

    def _where(self) -> str:
        return self.base_url or "api.openai.com"

    def complete(self, agent: str, messages: list[dict[str, str]], schema: type[T], *, iteration: int = 0,
                 validate: Any = None, seed: int | None = None) -> tuple[T, CallRecord]:
        """Asks for an answer of type ``schema``; ``validate(answer)`` may raise ValueError for extra checks.
        ``seed``: the sampling seed sent to the server (distinct candidates of one prompt get distinct seeds)."""
        start = time.perf_counter()
        conversation = list(messages)
        prompt_tokens = completion_tokens = 0
        text, error = "", ""
        call_id = uuid.uuid4().hex
        for attempt in range(1, ANSWER_ATTEMPTS + 1):
            # Who asks, and which call a retry belongs to: a relay or a replay server answers by these.
            headers = {AGENT_HEADER: agent, CALL_HEADER: call_id, ATTEMPT_HEADER: str(attempt)}
            response = self._create(conversation, schema, headers, seed)
            usage = getattr(response, "usage", None)
            prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
            text = (response.choices[0].message.content or "") if response.choices else ""
            try:
                answer = schema.model_validate(parse_json_leniently(text))
                if validate is not None:
                    validate(answer)
            except (ValueError, ValidationError) as exc:
                error = validation_text(exc)
                log.info("%s answer invalid (attempt %d): %s", agent, attempt, error[:300])
                # The whole answer goes back: a repair rewrites it, and half of an 8,000-character skill (it was cut
                # at 4,000) had the model write the other half again from memory. max_tokens bounds it.
                conversation = [*messages, {"role": "assistant", "content": text},
                                {"role": "user", "content": f"That answer is invalid: {error}\nAnswer again with "
                                                            "only a JSON object that matches the schema."}]
                continue
            record = self._record(agent, iteration, conversation, text, answer.model_dump(), prompt_tokens,
                                  completion_tokens, time.perf_counter() - start, attempt)
            return answer, record
        record = self._record(agent, iteration, conversation, text, None, prompt_tokens, completion_tokens,
                              time.perf_counter() - start, ANSWER_ATTEMPTS, error)
        raise StructuredOutputError(f"{agent} agent: the model's answer did not match {schema.__name__} after one "
                                    f"repair attempt: {error[:500]}", record)

    def _record(self, agent: str, iteration: int, messages: list[dict[str, str]], text: str,
                parsed: dict[str, Any] | None, prompt_tokens: int, completion_tokens: int, latency: float,
                attempts: int, error: str = "") -> CallRecord:
        record = CallRecord(seq=self._next_seq(), agent=agent, iteration=iteration, model=self.model,
                            messages=messages, response=text, parsed=parsed, prompt_tokens=prompt_tokens,
                            completion_tokens=completion_tokens, latency_seconds=latency, attempts=attempts,
                            error=error)
        write_record(self.record_dir, record)
        self.ledger.add(record)
        return record


def record_json(record: CallRecord) -> str:
    """The record as JSON; attached images (a VLM critic's frames, megabytes of base64) are replaced by a note."""
    data = dataclasses.asdict(record)
    for message in data["messages"]:
        if isinstance(message.get("content"), list):
            message["content"] = [part if part.get("type") != "image_url" else
                                  {"type": "image_url", "image_url": {"url": "(image left out of the record)"}}
                                  for part in message["content"]]
    return json.dumps(data, indent=1)


def record_from_json(text: str) -> CallRecord:
    """The inverse of record_json (raises ValueError on anything that is not a record)."""
    try:
        return CallRecord(**json.loads(text))
    except TypeError as exc:
        raise ValueError(f"not an LLM call record: {exc}") from exc


def write_record(record_dir: Path | None, record: CallRecord) -> None:
    if record_dir is None:
        return
    record_dir.mkdir(parents=True, exist_ok=True)
    path = record_dir / f"{record.seq:05d}-{record.agent}.json"
    record.path = str(path)
    path.write_text(record_json(record))


def _short(exc: Exception) -> str:
    return str(exc).replace("\n", " ")[:300]


def validation_text(exc: Exception) -> str:
    """What a repair request says was wrong, one part per error; a text over its limit says its length, so that a
    model that cannot count characters knows by how much to shorten it."""
    if isinstance(exc, ValidationError):
        return "; ".join(_error_part(e) for e in exc.errors()[:8])
    return str(exc)


def _error_part(error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "answer"
    value = error.get("input")
    if error.get("type") == "string_too_long" and isinstance(value, str):
        limit = int((error.get("ctx") or {}).get("max_length", 0))
        return f"{where}: {error['msg']} (it has {len(value):,}; cut at least {len(value) - limit:,})"
    return f"{where}: {error['msg']}"
