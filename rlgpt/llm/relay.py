"""The LLM relay: each chat request becomes a file, and the answer is whatever file appears beside it.

``rlgpt serve llm-relay --dir DIR`` serves an OpenAI-compatible API. Request N is written to
``DIR/requests/NNNN.json`` (the messages, the schema, where to answer); the reply is the content of
``DIR/answers/NNNN.json``, exactly the assistant's text: for the product's agents one JSON object that
matches the request's schema. Anyone can answer: a person, another system, or a capable model that sees
nothing but the request file. It is a debugging and evaluation tool, not a production backend.

A bad answer file (empty, not JSON, not matching the schema) is moved to ``DIR/rejected/`` with a
``.txt`` that says why, and the request keeps waiting for a corrected one; an answer file whose number
was never requested is moved there too. A request with no answer in time gets HTTP 504 (the client
retries it under the same number, so a late answer is still used).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from rlgpt.llm.chat_server import ChatRequest, ChatServerError, estimated_tokens
from rlgpt.llm.client import parse_json_leniently

log = logging.getLogger(__name__)
_FRESH_SECONDS = 1.0  # a file younger than this may still be being written: read it again before judging it


def _number(path: Path) -> int | None:
    return int(path.stem) if path.stem.isdigit() else None


def check_answer(text: str, request: ChatRequest) -> str | None:
    """Why ``text`` cannot be the reply to ``request``, or None when it can."""
    if not text.strip():
        return "the answer file is empty: write the assistant's reply into it"
    limit = request.body.get("max_tokens")
    if isinstance(limit, int) and limit > 0 and estimated_tokens(text) > limit:
        return (f"the answer is about {estimated_tokens(text):,} tokens ({len(text):,} characters / 4) and this "
                f"request allows max_tokens={limit:,}: a real server would cut it off there; write at most "
                f"{4 * limit:,} characters")
    if not request.wants_json():
        return None
    try:
        answer = parse_json_leniently(text)
    except ValueError as exc:
        return (f"the answer is not JSON ({exc}); this request asks for one JSON object that matches "
                "response_format's schema, and nothing else in the file")
    schema = request.schema()
    if schema:
        import jsonschema

        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(answer), key=lambda e: list(e.path))
        if errors:
            where = lambda e: "/".join(str(p) for p in e.path) or "(the object)"  # noqa: E731
            return "the answer does not match the schema: " + "; ".join(
                f"{where(e)}: {e.message[:200]}" for e in errors[:5])
    return None


class DirectoryAnswerer:
    """Answers requests from files in one directory; thread-safe (the planner and the critic call at once)."""

    def __init__(self, root: Path, *, timeout_seconds: float = 1800.0, poll_seconds: float = 0.5):
        self.root = root
        self.requests, self.answers, self.rejected = root / "requests", root / "answers", root / "rejected"
        for folder in (self.requests, self.answers, self.rejected):
            folder.mkdir(parents=True, exist_ok=True)
        self.timeout_seconds = timeout_seconds
        self.poll_seconds = poll_seconds
        self._lock = threading.Lock()
        # Numbers go on from an earlier relay on the same directory; its answers stay where they are.
        known = [n for n in map(_number, self.requests.glob("*.json")) if n is not None]
        self._next = max(known, default=0) + 1
        self._first = self._next
        self._by_call: dict[tuple[str, int], int] = {}  # (call id, attempt) -> request number
        self._accepted: dict[int, str] = {}
        self._stop = threading.Event()
        self._janitor = threading.Thread(target=self._sweep_orphans, name="relay-janitor", daemon=True)
        self._janitor.start()

    def close(self) -> None:
        self._stop.set()

    def _register(self, request: ChatRequest) -> tuple[int, bool]:
        """The request's number (a retry of a call keeps its number) and whether it is new."""
        key = (request.call_id, request.attempt)
        with self._lock:
            if request.call_id and key in self._by_call:
                return self._by_call[key], False
            number = self._next
            self._next += 1
            if request.call_id:
                self._by_call[key] = number
        return number, True

    def _write_request(self, number: int, request: ChatRequest) -> Path:
        answer_path = self.answers / f"{number:04d}.json"
        limit = request.body.get("max_tokens")
        how = ("Write the assistant's reply, exactly, to the answer file"
               + (f", at most {4 * limit:,} characters (max_tokens={limit:,}, counted as characters / 4: a real "
                  "server would cut a longer reply off). " if isinstance(limit, int) and limit > 0 else ". ")
               + ("This request asks for JSON: write one JSON object that matches response_format's schema and "
                  "nothing else." if request.wants_json() else "Plain text is fine."))
        doc: dict[str, Any] = {
            "request": number, "agent": request.agent or "(unknown client)", "attempt": request.attempt,
            "answer_file": str(answer_path), "how_to_answer": how,
            "model": request.body.get("model"), "temperature": request.body.get("temperature"),
            "max_tokens": request.body.get("max_tokens"), "messages": request.messages,
            "response_format": request.response_format}
        path = self.requests / f"{number:04d}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        tmp.replace(path)  # an answerer watching the folder never reads half a request
        return path

    def _reject(self, path: Path, number: int, reason: str) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.rejected / f"{number:04d}-{stamp}.json"
        path.replace(target)
        # The reason appears whole or not at all: whoever watches rejected/ never reads a half-written file.
        tmp = target.with_suffix(".txt.tmp")
        tmp.write_text(reason + "\n")
        tmp.replace(target.with_suffix(".txt"))
        log.warning("relay: answer %04d rejected (%s); kept as %s", number, reason, target)

    def answer(self, request: ChatRequest) -> str:
        number, new = self._register(request)
        with self._lock:
            if number in self._accepted:
                return self._accepted[number]
        request_path = self._write_request(number, request) if new else self.requests / f"{number:04d}.json"
        if new:
            log.info("relay: request %04d (%s) waits for %s", number, request.agent or "?",
                     self.answers / f"{number:04d}.json")
        answer_path = self.answers / f"{number:04d}.json"
        deadline = time.monotonic() + self.timeout_seconds
        last_problem = ""
        while time.monotonic() < deadline and not self._stop.is_set():
            if answer_path.exists():
                text = answer_path.read_text(errors="replace")
                problem = check_answer(text, request)
                if problem is None:
                    with self._lock:
                        self._accepted[number] = text
                    log.info("relay: request %04d answered (%d characters)", number, len(text))
                    return text
                if time.time() - answer_path.stat().st_mtime >= _FRESH_SECONDS:
                    self._reject(answer_path, number, problem)
                    last_problem = problem
            time.sleep(self.poll_seconds)
        rejected = f"; the last answer was rejected: {last_problem}" if last_problem else ""
        raise ChatServerError(504, f"no answer to relay request {number:04d} ({request_path}) within "
                                   f"{self.timeout_seconds:.0f} s: write the reply to {answer_path}{rejected}")

    def _sweep_orphans(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            for path in self.answers.glob("*.json"):
                number = _number(path)
                with self._lock:
                    requested = number is not None and number < self._next
                if requested or not path.exists():
                    continue
                if time.time() - path.stat().st_mtime < _FRESH_SECONDS:
                    continue
                known = f"requests {self._first:04d}-{self._next - 1:04d}" if self._next > self._first else "none yet"
                try:
                    self._reject(path, number if number is not None else 0,
                                 f"{path.name} answers a request that was never made (made so far: {known}); "
                                 "name an answer after its request file")
                except FileNotFoundError:
                    pass
