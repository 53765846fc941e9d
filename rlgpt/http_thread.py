"""An HTTP server answering on a daemon thread of this process: the embedded chat server and the tests' HTTP
stand-ins start, stop and nest it in ``with`` blocks the same way."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class HTTPThread:
    """Binds ``(host, port)`` at construction (``address`` and ``port`` say where; port 0 picks a free one),
    serves from ``start()`` until ``stop()``; a context manager."""

    poll_interval: float = 0.5
    """How often the serving loop looks for a stop; ``stop()`` waits up to this long."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, host: str = "127.0.0.1", port: int = 0,
                 name: str = "http-server"):
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True  # a hung request must not keep the process alive
        self.address: tuple[str, int] = self._httpd.server_address[:2]
        self.port = self.address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": self.poll_interval},
                                        name=name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() of a server that never served would wait forever
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
