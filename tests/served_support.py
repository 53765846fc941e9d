"""One servicer on a free loopback port over a real gRPC channel, for integration tests (a unit test may not
serve)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server


@contextlib.contextmanager
def served(name: str, add: Callable[[Any, grpc.Server], None], servicer: Any) -> Iterator[grpc.Channel]:
    """Serves ``servicer`` (``add``: the generated ``add_*Servicer_to_server``) under the health name ``name``;
    yields a channel to it; stops the server (1 s grace) when done."""
    server, port = create_server("127.0.0.1:0", [ServiceBinding(name, add, servicer)])
    channel = create_channel(f"127.0.0.1:{port}", default_timeout=60, wait_ready_seconds=10)
    try:
        yield channel
    finally:
        channel.close()
        stop_server(server, 1)
