"""Client channels with default deadlines, retries on UNAVAILABLE, keepalive and large messages."""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from rlgpt.errors import ServiceFailed


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


BUSY = ("rlgpt-busy", "retry-later")
"""Trailing metadata of a RESOURCE_EXHAUSTED that refused a long unary call because the server served as many of its
method as it serves at once (rlgpt.call_slots): the same call may be served once one of them has ended."""
BUSY_WAIT_SECONDS = (0.5, 5.0)
"""The first and the longest wait before asking a busy server again (:class:`_WaitWhenBusy`), doubling in between."""


class _WaitWhenBusy(grpc.UnaryUnaryClientInterceptor):
    """Asks again, waiting longer each time (:data:`BUSY_WAIT_SECONDS`) until the call's deadline, a unary call that
    a busy server refused (RESOURCE_EXHAUSTED with :data:`BUSY`); the last refusal is the answer when the deadline
    comes first. The server keeps no thread for a waiting caller, the caller keeps its place in its own work."""

    def intercept_unary_unary(self, continuation: Any, details: grpc.ClientCallDetails, request: Any) -> Any:
        start, wait = time.monotonic(), BUSY_WAIT_SECONDS[0]
        asked = details
        while True:
            outcome = continuation(asked, request)
            if not (isinstance(outcome, grpc.RpcError) and outcome.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    and BUSY in [tuple(m) for m in outcome.trailing_metadata() or ()]):
                return outcome
            left = None if details.timeout is None else details.timeout - (time.monotonic() - start)
            if left is not None and left <= wait:
                return outcome
            time.sleep(wait)
            wait = min(2 * wait, BUSY_WAIT_SECONDS[1])
            if details.timeout is not None:
                asked = _CallDetails(details.method, details.timeout - (time.monotonic() - start), details.metadata,
                                     details.credentials, details.wait_for_ready, details.compression)


class _NamedPeer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Raises :class:`~rlgpt.errors.ServiceFailed`, naming the peer and its address, where a call fails because the
    peer is unavailable (gone, or short of a service it needs) or did not answer within the call's deadline. A
    DEADLINE_EXCEEDED the peer answered well before the deadline is its own answer about the work (a skill that ran
    out of time): it stays an RpcError."""

    def __init__(self, service: str, address: str):
        self._service, self._address = service, address

    def _failure(self, exc: grpc.RpcError, details: grpc.ClientCallDetails, start: float) -> ServiceFailed | None:
        code, method = exc.code(), details.method.rsplit("/", 1)[-1]
        timed_out = (code == grpc.StatusCode.DEADLINE_EXCEEDED and details.timeout is not None
                     and time.monotonic() - start >= 0.95 * details.timeout)
        if code != grpc.StatusCode.UNAVAILABLE and not timed_out:
            return None
        return ServiceFailed(self._service, self._address, method, code, exc.details() or "",
                             details.timeout if timed_out else None)

    def intercept_unary_unary(self, continuation: Any, details: grpc.ClientCallDetails, request: Any) -> Any:
        start = time.monotonic()
        outcome = continuation(details, request)
        if isinstance(outcome, grpc.RpcError) and (failure := self._failure(outcome, details, start)) is not None:
            raise failure from None
        return outcome

    def intercept_unary_stream(self, continuation: Any, details: grpc.ClientCallDetails, request: Any) -> Any:
        start = time.monotonic()
        return _PeerStream(continuation(details, request), lambda exc: self._failure(exc, details, start))


class _PeerStream:
    """A server stream whose errors pass through ``failure`` (:class:`_NamedPeer`); otherwise the call itself."""

    def __init__(self, call: Any, failure: Callable[[grpc.RpcError], ServiceFailed | None]):
        self._call, self._failure = call, failure

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._call)
        except grpc.RpcError as exc:
            failure = self._failure(exc)
            if failure is None:
                raise
            raise failure from None

    def __getattr__(self, name: str) -> Any:  # cancel(), code(), details(), ... of the call
        return getattr(self._call, name)


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
                   wait_ready_seconds: float | None = None, peer: str = "",
                   wait_when_busy: bool = False) -> grpc.Channel:
    """An insecure channel to ``target`` ("host:port").

    Unary and server-streaming calls without an explicit ``timeout`` get ``default_timeout``
    seconds (streams that should outlive it pass their own). With ``wait_ready_seconds`` the call
    blocks until the channel connects and raises ``grpc.FutureTimeoutError`` past it. With ``peer`` (what the
    target is: "env server", "learner"), a unary or server-streaming call to a peer that is unavailable or does not
    answer in time raises :class:`~rlgpt.errors.ServiceFailed` naming it and ``target``, instead of
    ``grpc.RpcError``. With ``wait_when_busy``, a unary call the peer refused because it serves as many calls of that
    method as it may at once (a skill's test, an evaluation, a verdict) is asked again until its deadline.
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
    named = (_NamedPeer(peer, target),) if peer else ()
    waits = (_WaitWhenBusy(),) if wait_when_busy else ()
    # The default deadline first: the other interceptors see every call's deadline.
    return grpc.intercept_channel(channel, _DefaultDeadline(default_timeout), *waits, *named)
