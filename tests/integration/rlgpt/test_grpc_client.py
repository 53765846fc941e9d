"""Client channels against a real server on 127.0.0.1 port 0: default deadlines, retries, readiness, limits."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from rlgpt import errors
from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.v1 import env_pb2, env_pb2_grpc, learner_pb2, learner_pb2_grpc

ENV_SERVICE = env_pb2.DESCRIPTOR.services_by_name["EnvService"].full_name
LEARNER_SERVICE = learner_pb2.DESCRIPTOR.services_by_name["LearnerService"].full_name


class Slow(env_pb2_grpc.EnvServiceServicer, learner_pb2_grpc.LearnerServiceServicer):
    """Describe(backend="sleep:S") answers after S seconds; "flaky:N" is UNAVAILABLE for its first N calls."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()

    @errors.grpc_errors
    def Describe(self, request: env_pb2.DescribeRequest, context: grpc.ServicerContext) -> env_pb2.DescribeResponse:
        with self.lock:
            self.calls[request.backend] = self.calls.get(request.backend, 0) + 1
            calls = self.calls[request.backend]
        kind, _, value = request.backend.partition(":")
        if kind == "sleep":
            time.sleep(float(value))
        elif kind == "flaky" and calls <= int(value):
            raise errors.Unavailable(f"call {calls} refused")
        elif kind == "big":
            return env_pb2.DescribeResponse(skill_api="x" * int(value) * 1024 * 1024)
        return env_pb2.DescribeResponse(backend=f"answered call {calls}")

    @errors.grpc_errors
    def WatchJob(self, request: learner_pb2.WatchJobRequest,
                 context: grpc.ServicerContext) -> Iterator[learner_pb2.JobProgress]:
        yield learner_pb2.JobProgress(job_id=request.job_id)
        time.sleep(float(request.job_id))
        yield learner_pb2.JobProgress(job_id=request.job_id)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Slow]]:
    slow = Slow()
    grpc_server, port = create_server("127.0.0.1:0", [
        ServiceBinding(ENV_SERVICE, env_pb2_grpc.add_EnvServiceServicer_to_server, slow),
        ServiceBinding(LEARNER_SERVICE, learner_pb2_grpc.add_LearnerServiceServicer_to_server, slow)],
        max_workers=8, metrics_label="grpc-client-test")
    yield f"127.0.0.1:{port}", slow
    stop_server(grpc_server, grace_seconds=0.5)


def test_a_call_without_timeout_gets_the_channels_default_deadline(server) -> None:
    target, _slow = server
    with create_channel(target, default_timeout=0.3, wait_ready_seconds=10) as channel:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        start = time.monotonic()
        with pytest.raises(grpc.RpcError) as info:
            stub.Describe(env_pb2.DescribeRequest(backend="sleep:1.0"))
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - start < 0.9
        # An explicit timeout wins over the default.
        assert stub.Describe(env_pb2.DescribeRequest(backend="sleep:0.5"), timeout=5).backend.startswith("answered")


def test_server_streams_get_the_default_deadline_too(server) -> None:
    target, _slow = server
    with create_channel(target, default_timeout=0.3, wait_ready_seconds=10) as channel:
        stream = learner_pb2_grpc.LearnerServiceStub(channel).WatchJob(learner_pb2.WatchJobRequest(job_id="1.0"))
        assert next(stream).job_id == "1.0"
        with pytest.raises(grpc.RpcError) as info:
            next(stream)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        long_stream = learner_pb2_grpc.LearnerServiceStub(channel).WatchJob(
            learner_pb2.WatchJobRequest(job_id="0.5"), timeout=5)
        assert len(list(long_stream)) == 2


def test_unavailable_is_retried_until_the_server_answers(server) -> None:
    target, slow = server
    with create_channel(target, default_timeout=10, wait_ready_seconds=10) as channel:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        assert stub.Describe(env_pb2.DescribeRequest(backend="flaky:2")).backend == "answered call 3"
        with pytest.raises(grpc.RpcError) as info:  # four attempts in all, then the error reaches the caller
            stub.Describe(env_pb2.DescribeRequest(backend="flaky:10"))
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE and info.value.details() == "call 4 refused"
        assert slow.calls["flaky:10"] == 4


def test_other_errors_are_not_retried(server) -> None:
    target, slow = server
    with create_channel(target, default_timeout=0.3, wait_ready_seconds=10) as channel:
        with pytest.raises(grpc.RpcError) as info:
            env_pb2_grpc.EnvServiceStub(channel).Describe(env_pb2.DescribeRequest(backend="sleep:0.6"))
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        time.sleep(0.4)  # the server finishes the abandoned call
        assert slow.calls["sleep:0.6"] == 1


def test_wait_ready_raises_when_nothing_listens() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connections are refused
        start = time.monotonic()
        with pytest.raises(grpc.FutureTimeoutError):
            create_channel(f"127.0.0.1:{port}", wait_ready_seconds=0.5)
        assert time.monotonic() - start < 3


def test_the_client_receive_limit_is_max_message_mb(server) -> None:
    target, _slow = server
    with (create_channel(target, max_message_mb=1, wait_ready_seconds=10) as small,
          create_channel(target, wait_ready_seconds=10) as large):
        with pytest.raises(grpc.RpcError) as info:
            env_pb2_grpc.EnvServiceStub(small).Describe(env_pb2.DescribeRequest(backend="big:2"))
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # 64 MB by default: far over grpc's own 4 MB.
        assert len(env_pb2_grpc.EnvServiceStub(large).Describe(
            env_pb2.DescribeRequest(backend="big:6")).skill_api) == 6 * 1024 * 1024
