"""The embedded server is started only once it has produced a token: a llama.cpp built for another CPU lists its
models and then dies on the first token, which must be said at start, not as a connection error mid-run."""

from __future__ import annotations

import sys
import textwrap

import pytest

from rlgpt.config import LLMSettings
from rlgpt.errors import Unavailable
from rlgpt.llm.local_server import LocalLLMServer

pytestmark = pytest.mark.timeout(120)

# A real HTTP server on loopback that answers /v1/models like llama.cpp's and, on a completion, either answers or
# dies by SIGSEGV as the native build did on a CPU whose AMX the VM does not allow.
SERVER = textwrap.dedent("""
    import http.server, json, os, signal, sys

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self, payload):
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._answer({"object": "list", "data": [{"id": "local", "object": "model"}]})

        def do_POST(self):
            if sys.argv[2] == "crash":
                os.kill(os.getpid(), signal.SIGSEGV)
            self._answer({"choices": [{"text": " hi", "index": 0}]})

    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
""")


class StandInServer(LocalLLMServer):
    """LocalLLMServer with the stand-in above as its process (its start and first-token check are what is tested)."""

    behaviour = "answer"

    def command(self) -> list[str]:
        return [sys.executable, "-c", SERVER, str(self.port), self.behaviour]


class CrashingServer(StandInServer):
    behaviour = "crash"


def test_a_server_that_dies_on_its_first_token_is_refused_at_start_with_the_fix(tmp_path) -> None:
    server = CrashingServer(LLMSettings(local_start_seconds=30), log_path=tmp_path / "llm.log")
    with pytest.raises(Unavailable, match=r"exited with signal SIGSEGV on its first token") as caught:
        server.start()
    assert "rm -f .stamps/llama && make setup" in str(caught.value)
    assert server._process is not None and server._process.poll() is not None


def test_a_server_that_answers_its_first_token_starts(tmp_path) -> None:
    with StandInServer(LLMSettings(local_start_seconds=30), log_path=tmp_path / "llm.log") as server:
        assert server._process is not None and server._process.poll() is None
    assert server._process.poll() is not None
