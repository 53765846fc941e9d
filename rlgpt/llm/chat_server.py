"""An OpenAI-compatible chat server whose answers come from an ``Answerer``: files (the relay) or records (replay).

Only what the product's LLM client uses is served: ``POST /v1/chat/completions`` (no streaming),
``GET /v1/models`` and ``GET /health``. Errors go out in OpenAI's error shape, so the client's own
handling applies: 4xx is final and names the problem, 5xx and 504 are retried.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from rlgpt.http_thread import HTTPThread

log = logging.getLogger(__name__)
MAX_REQUEST_BYTES = 8 * 1024 * 1024
# Headers rlgpt's LLM client sends with every call (other clients simply lack them).
AGENT_HEADER = "X-RLGPT-Agent"
CALL_HEADER = "X-RLGPT-Call"
ATTEMPT_HEADER = "X-RLGPT-Attempt"


def send_json(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> bool:
    """Sends one JSON response; False when the client had already left (it gave up waiting)."""
    data = json.dumps(body).encode()
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


class ChatServerError(Exception):
    """An answer that cannot be given; ``status`` is the HTTP status the client sees."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass
class ChatRequest:
    """One chat completion request, as the answerer sees it."""

    body: dict[str, Any]
    agent: str = ""
    call_id: str = ""
    attempt: int = 1

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body["messages"]

    @property
    def response_format(self) -> dict[str, Any]:
        return self.body.get("response_format") or {}

    def schema(self) -> dict[str, Any] | None:
        """The JSON schema the answer must match, from json_schema or llama.cpp-style json_object formats."""
        fmt = self.response_format
        if fmt.get("type") == "json_schema":
            return (fmt.get("json_schema") or {}).get("schema")
        if fmt.get("type") == "json_object":
            return fmt.get("schema")
        return None

    def wants_json(self) -> bool:
        return self.response_format.get("type") in ("json_schema", "json_object")


class Answerer(Protocol):
    """Gives the assistant's reply text to one request, or raises ChatServerError."""

    def answer(self, request: ChatRequest) -> str: ...


def estimated_tokens(text: str) -> int:
    """Tokens as characters / 4: the relay has no tokenizer (a record says its counts are estimates)."""
    return math.ceil(len(text) / 4)


def parse_request(raw: bytes, headers: Any) -> ChatRequest:
    """A ChatRequest from an HTTP body, or a 400 that says what is wrong."""
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ChatServerError(400, f"the request body is not JSON ({exc})") from None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        raise ChatServerError(400, "the request needs a non-empty 'messages' list")
    for i, message in enumerate(body["messages"]):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise ChatServerError(400, f"messages[{i}] needs 'role' and 'content'")
    if body.get("stream"):
        raise ChatServerError(400, "streaming is not served; send stream=false")
    try:
        attempt = int(headers.get(ATTEMPT_HEADER) or 1)
    except ValueError:
        raise ChatServerError(400, f"{ATTEMPT_HEADER} must be an integer") from None
    return ChatRequest(body=body, agent=(headers.get(AGENT_HEADER) or "")[:64],
                       call_id=(headers.get(CALL_HEADER) or "")[:64], attempt=attempt)


class ChatServer(HTTPThread):
    """The HTTP server on a thread; a context manager. ``base_url`` ends in ``/v1``."""

    def __init__(self, answerer: Answerer, *, host: str = "127.0.0.1", port: int = 0, model: str = "relay"):
        self.answerer = answerer
        self.model = model
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug("%s " + fmt, self.client_address[0], *args)

            def _send(self, status: int, body: dict[str, Any]) -> None:
                if not send_json(self, status, body):
                    log.info("the client left before its answer was sent")

            def _error(self, status: int, message: str) -> None:
                kind = "invalid_request_error" if status < 500 else "server_error"
                self._send(status, {"error": {"message": message, "type": kind, "code": status}})

            def do_GET(self) -> None:
                path = self.path.rstrip("/")
                if path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                elif path in ("/health", "/v1/health"):
                    self._send(200, {"status": "ok"})
                else:
                    self._error(404, f"no such path {self.path[:80]!r}: POST /v1/chat/completions")

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._error(404, f"no such path {self.path[:80]!r}: POST /v1/chat/completions")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_REQUEST_BYTES:
                    self._error(413, f"the request has {length} bytes; at most {MAX_REQUEST_BYTES} are taken")
                    return
                try:
                    request = parse_request(self.rfile.read(length), self.headers)
                    text = server.answerer.answer(request)
                except ChatServerError as exc:
                    self._error(exc.status, str(exc))
                    return
                except Exception as exc:  # a bug in an answerer must not kill the server
                    log.exception("answerer failed")
                    self._error(500, f"internal error of the answerer: {type(exc).__name__}: {exc}")
                    return
                prompt = sum(estimated_tokens(str(m.get("content", ""))) for m in request.messages)
                completion = estimated_tokens(text)
                self._send(200, {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
                    "model": request.body.get("model") or server.model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                              "total_tokens": prompt + completion}})

        super().__init__(Handler, host=host, port=port, name="chat-server")

    @property
    def base_url(self) -> str:
        return f"http://{self.address[0]}:{self.port}/v1"
