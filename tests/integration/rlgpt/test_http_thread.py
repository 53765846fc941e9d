"""rlgpt.http_thread: the HTTP server on a thread serves inside its ``with`` block and stops cleanly, started or not."""

from __future__ import annotations

import urllib.request
from http.server import BaseHTTPRequestHandler

from rlgpt.http_thread import HTTPThread


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args: object) -> None:
        pass


def test_serves_inside_the_with_block_on_the_port_it_picked() -> None:
    with HTTPThread(_Hello) as server:
        assert server.port > 0 and server.address == ("127.0.0.1", server.port)
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=5) as answer:
            assert answer.read() == b"hello"


def test_stop_of_a_server_never_started_returns_and_frees_the_port() -> None:
    server = HTTPThread(_Hello)
    server.stop()  # shutdown() alone would wait forever for a loop that never ran
    assert server._httpd.socket.fileno() == -1
