"""Test double of an OpenAI-compatible chat server (a hosted LLM cannot run in tests).

A real HTTP server on 127.0.0.1 (port 0) answering POST /v1/chat/completions and GET /v1/models
from a script: each request takes the next scripted reply, the last one repeats. A reply is an
answer text (200 with usage), an HTTP status with an error body, a delay before answering (to make
the client time out), or a callable of the request body. Every request body is recorded.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from rlgpt.http_thread import HTTPThread
from rlgpt.llm.chat_server import send_json


@dataclasses.dataclass
class Reply:
    """One scripted reply."""

    text: str | None = None
    status: int = 200
    delay: float = 0.0
    error: str = "scripted error"

    @classmethod
    def json(cls, obj: Any) -> Reply:
        return cls(text=json.dumps(obj))


class FakeOpenAIServer(HTTPThread):
    """The double itself; use as a context manager."""

    def __init__(self, script: list[Reply | Callable[[dict[str, Any]], Reply]],
                 models: tuple[str, ...] = ("scripted",)):
        self.script = list(script)
        self.models = models
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # each request's HTTP headers, names lower-cased
        self._lock = threading.Lock()
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                send_json(self, status, body)  # a client that gave up (timeout tests) is fine

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in double.models]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with double._lock:
                    double.requests.append(body)
                    double.headers.append({k.lower(): v for k, v in self.headers.items()})
                    index = min(len(double.requests) - 1, len(double.script) - 1)
                    reply = double.script[index]
                if callable(reply):
                    reply = reply(body)
                if body.get("model") not in double.models:
                    self._send(404, {"error": {"message": f"model {body.get('model')} not found",
                                               "type": "invalid_request_error", "code": "model_not_found"}})
                    return
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    self._send(reply.status, {"error": {"message": reply.error, "type": "server_error"}})
                    return
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply.text}}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
                })

        super().__init__(Handler, name="fake-openai")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"
