"""Client channels with default deadlines, retries on UNAVAILABLE, keepalive and large messages."""

from __future__ import annotations

import collections
import json
from typing import Any

import grpc


class _DefaultDeadline(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Gives every call that sets no timeout the channel's default deadline, so no call hangs forever."""

    def __init__(self, seconds: float):
        self._seconds = seconds

    def _details(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        if details.timeout is not None:
            return details
        return _CallDetails(details.method, self._seconds, details.metadata, details.credentials,
                            details.wait_for_ready, details.compression)

    def intercept_unary_unary(self, continuation: Any, details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(self._details(details), request)


class _CallDetails(collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials",
                                                        "wait_for_ready", "compression")),
                   grpc.ClientCallDetails):
    """A call's details with the timeout filled in (grpc.ClientCallDetails is abstract: grpc's examples build one
    as a namedtuple so)."""


def _service_config() -> str:
    # Transparent retries of calls that never reached the server (UNAVAILABLE) with backoff.
    return json.dumps({"methodConfig": [{
        "name": [{}],
        "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "2s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
    }]})


KEEPALIVE_MS = 30000
"""Clients ping an idle connection this often (a long quiet stream such as WatchRun stays open); servers accept
pings at that rate (rlgpt.grpc_server), else they answer GOAWAY "too_many_pings"."""


def create_channel(target: str, *, default_timeout: float = 30.0, max_message_mb: int = 64,
                   wait_ready_seconds: float | None = None) -> grpc.Channel:
    """An insecure channel to ``target`` ("host:port").

    Unary and server-streaming calls without an explicit ``timeout`` get ``default_timeout``
    seconds (streams that should outlive it pass their own). With ``wait_ready_seconds`` the call
    blocks until the channel connects and raises ``grpc.FutureTimeoutError`` past it.
    """
    limit = max_message_mb * 1024 * 1024
    channel = grpc.insecure_channel(target, options=[
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", 10000),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", _service_config()),
    ])
    if wait_ready_seconds is not None:
        grpc.channel_ready_future(channel).result(timeout=wait_ready_seconds)
    return grpc.intercept_channel(channel, _DefaultDeadline(default_timeout))
