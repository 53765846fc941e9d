"""Lockstep steps of one session over one ``StreamSteps`` call.

Each step writes one request and reads its response before the next is written, exactly as unary ``Step``
does, but without a new RPC per step: measured on 2 cores with 4 envs per step, about 100 us less client CPU
and 150-200 us less server CPU per step than unary ``Step`` (the learner's sessions step this way).
"""

from __future__ import annotations

import queue

import grpc

from rlgpt.v1 import env_pb2, env_pb2_grpc


class StepStream:
    """One open ``StreamSteps`` call; ``step`` raises ``grpc.RpcError`` as a unary call would."""

    def __init__(self, stub: env_pb2_grpc.EnvServiceStub):
        self._requests: queue.SimpleQueue[env_pb2.StepRequest | None] = queue.SimpleQueue()
        self._responses = stub.StreamSteps(iter(self._requests.get, None))

    def step(self, request: env_pb2.StepRequest, timeout: float | None = None) -> env_pb2.StepResponse:
        """The response to ``request``. ``timeout`` is accepted for the unary call's signature; a stream has no
        per-message deadline (a server that dies ends the stream with UNAVAILABLE)."""
        self._requests.put(request)
        try:
            return next(self._responses)
        except StopIteration:
            raise StreamEnded() from None

    def close(self) -> None:
        self._requests.put(None)
        self._responses.cancel()


class StreamEnded(grpc.RpcError):
    """The server ended the stream without an error: the session can no longer be stepped."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "the server ended the step stream"

    def __str__(self) -> str:
        return self.details()


