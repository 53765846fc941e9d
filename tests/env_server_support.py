"""What the env server's integration tests share: the status of a refused call, and checks that the server
still serves after a bad request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from rlgpt.v1 import env_pb2


def rpc_error(fn: Callable[[Any], Any], request: Any) -> tuple[grpc.StatusCode, str]:
    """(code, details) of ``fn(request)``, which must fail with a ``grpc.RpcError``."""
    with pytest.raises(grpc.RpcError) as info:
        fn(request)
    return info.value.code(), info.value.details()


def assert_health_serving(env_server: Any) -> None:
    """The standard health service says SERVING for the EnvService."""
    health = health_pb2_grpc.HealthStub(env_server.channel)
    reply = health.Check(health_pb2.HealthCheckRequest(service="rlgpt.v1.EnvService"), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def assert_healthy(env_server: Any) -> None:
    """Health says SERVING and a fresh session steps."""
    assert_health_serving(env_server)
    session = env_server.stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3))
    env_server.stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=[0]))
    env_server.stub.CloseSession(env_pb2.CloseSessionRequest(session_id=session.session_id))


class AbortingContext:
    """A servicer context for calling an EnvServicer method in process: ``abort`` keeps the code and details."""

    def __init__(self) -> None:
        self.code: Any = None
        self.details = ""

    def is_active(self) -> bool:
        return True

    def abort(self, code: Any, details: str) -> None:
        self.code, self.details = code, details
        raise RuntimeError(details)
