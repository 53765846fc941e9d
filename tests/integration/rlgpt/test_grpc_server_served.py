"""A real server on 127.0.0.1 port 0: health, reflection, the servicer edge's status codes, message limits, stop."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from rlgpt import errors, metrics
from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.v1 import env_pb2, env_pb2_grpc, learner_pb2, learner_pb2_grpc

ENV_SERVICE = env_pb2.DESCRIPTOR.services_by_name["EnvService"].full_name
LEARNER_SERVICE = learner_pb2.DESCRIPTOR.services_by_name["LearnerService"].full_name
LABEL = "grpc-server-test"
RAISES = {  # Describe(backend=key) raises this
    "invalid": errors.InvalidArgument("field x is bad"),
    "not_found": errors.NotFound("no session 's1'"),
    "exists": errors.AlreadyExists("skill 'a' exists"),
    "exhausted": errors.ResourceExhausted("too many sessions"),
    "precondition": errors.FailedPrecondition("minedojo is not installed"),
    "deadline": errors.DeadlineExceeded("skill ran 10 s"),
    "unavailable": errors.Unavailable("env server at x:1 did not answer"),
    "config": errors.ConfigError(["a must be > 0", "b is empty"]),
    "crash": ZeroDivisionError("division by zero"),
}


class EnvEdge(env_pb2_grpc.EnvServiceServicer):
    """A servicer of the real EnvService contract whose methods raise what a test asks for."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    @errors.grpc_errors
    def Describe(self, request: env_pb2.DescribeRequest, context: grpc.ServicerContext) -> env_pb2.DescribeResponse:
        if request.backend in RAISES:
            raise RAISES[request.backend]
        if request.backend.startswith("big:"):  # an answer of that many MB
            return env_pb2.DescribeResponse(skill_api="x" * int(float(request.backend[4:]) * 1024 * 1024))
        return env_pb2.DescribeResponse(backend=request.backend or "crafter")

    @errors.grpc_errors
    def StreamSteps(self, requests: Iterator[env_pb2.StepRequest],
                    context: grpc.ServicerContext) -> Iterator[env_pb2.StepResponse]:
        for request in requests:
            if request.session_id == "missing":
                raise errors.NotFound(f"no session {errors.shown(request.session_id)}")
            yield env_pb2.StepResponse(frames=[len(request.session_id)])  # echoes the id's length

    def close(self) -> None:
        self.closed.set()


class LearnerEdge(learner_pb2_grpc.LearnerServiceServicer):
    @errors.grpc_errors
    def WatchJob(self, request: learner_pb2.WatchJobRequest,
                 context: grpc.ServicerContext) -> Iterator[learner_pb2.JobProgress]:
        yield learner_pb2.JobProgress(job_id=request.job_id, env_frames=1)
        raise errors.FailedPrecondition(f"job {request.job_id} lost its env server")


def start(max_message_mb: int = 64) -> tuple[grpc.Server, int, EnvEdge]:
    env = EnvEdge()
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(ENV_SERVICE, env_pb2_grpc.add_EnvServiceServicer_to_server, env),
        ServiceBinding(LEARNER_SERVICE, learner_pb2_grpc.add_LearnerServiceServicer_to_server, LearnerEdge())],
        max_workers=4, max_message_mb=max_message_mb, metrics_label=LABEL)
    return server, port, env


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[int, grpc.Channel]]:
    server, port, _env = start(max_message_mb=2)
    channel = create_channel(f"127.0.0.1:{port}", default_timeout=10, wait_ready_seconds=10)
    yield port, channel
    channel.close()
    stop_server(server, grace_seconds=0.5)


def test_port_zero_binds_a_free_port_that_answers(served) -> None:
    port, channel = served
    assert 0 < port < 65536
    assert env_pb2_grpc.EnvServiceStub(channel).Describe(env_pb2.DescribeRequest(backend="b")).backend == "b"


def test_health_serves_every_service_and_the_server(served) -> None:
    _port, channel = served
    health = health_pb2_grpc.HealthStub(channel)
    for name in ("", ENV_SERVICE, LEARNER_SERVICE):
        answer = health.Check(health_pb2.HealthCheckRequest(service=name))
        assert answer.status == health_pb2.HealthCheckResponse.SERVING, name
    with pytest.raises(grpc.RpcError) as info:
        health.Check(health_pb2.HealthCheckRequest(service="rlgpt.v1.NoSuchService"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_reflection_lists_the_services_and_serves_their_files(served) -> None:
    _port, channel = served
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    requests = [reflection_pb2.ServerReflectionRequest(list_services=""),
                reflection_pb2.ServerReflectionRequest(file_containing_symbol=LEARNER_SERVICE)]
    listed, described = list(reflection.ServerReflectionInfo(iter(requests)))
    names = {s.name for s in listed.list_services_response.service}
    assert names == {ENV_SERVICE, LEARNER_SERVICE, "grpc.health.v1.Health",
                     "grpc.reflection.v1alpha.ServerReflection"}
    assert described.file_descriptor_response.file_descriptor_proto  # grpcurl can describe the contract


@pytest.mark.parametrize("kind", sorted(RAISES))
def test_domain_errors_map_to_their_status_codes(served, kind: str) -> None:
    _port, channel = served
    stub = env_pb2_grpc.EnvServiceStub(channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.Describe(env_pb2.DescribeRequest(backend=kind))
    raised = RAISES[kind]
    if isinstance(raised, errors.RlgptError):
        assert info.value.code() == type(raised).code
        assert info.value.details() == str(raised)
    else:  # an unexpected exception is INTERNAL, names the method and the error
        assert info.value.code() == grpc.StatusCode.INTERNAL
        assert info.value.details() == "internal error in Describe: ZeroDivisionError: division by zero"
    assert stub.Describe(env_pb2.DescribeRequest()).backend == "crafter"  # the server keeps serving


def test_calls_are_counted_by_method_and_status_code(served) -> None:
    _port, channel = served
    stub = env_pb2_grpc.EnvServiceStub(channel)

    def count(code: str) -> float:
        return metrics.GRPC_REQUESTS.labels(LABEL, "Describe", code)._value.get()

    before_ok, before_missing = count("OK"), count("NOT_FOUND")
    stub.Describe(env_pb2.DescribeRequest())
    with pytest.raises(grpc.RpcError):
        stub.Describe(env_pb2.DescribeRequest(backend="not_found"))
    assert count("OK") == before_ok + 1
    assert count("NOT_FOUND") == before_missing + 1


def test_a_server_stream_sends_what_it_yielded_then_the_mapped_status(served) -> None:
    _port, channel = served
    stream = learner_pb2_grpc.LearnerServiceStub(channel).WatchJob(learner_pb2.WatchJobRequest(job_id="j1"))
    received = []
    with pytest.raises(grpc.RpcError) as info:
        for progress in stream:
            received.append(progress)
    assert [p.job_id for p in received] == ["j1"]
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert info.value.details() == "job j1 lost its env server"


def test_a_bidirectional_stream_maps_errors_too(served) -> None:
    _port, channel = served
    requests = [env_pb2.StepRequest(session_id="abc"), env_pb2.StepRequest(session_id="missing")]
    answers = env_pb2_grpc.EnvServiceStub(channel).StreamSteps(iter(requests))
    assert list(next(answers).frames) == [3]
    with pytest.raises(grpc.RpcError) as info:
        next(answers)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND and "'missing'" in info.value.details()


INVALID_UTF8 = b"\x0a\x02\xff\xfe"  # field 1 (a string) holding bytes that are not UTF-8


def test_a_request_that_does_not_parse_is_invalid_argument(served) -> None:
    """grpc alone answers INTERNAL for a request that does not parse; the server says INVALID_ARGUMENT."""
    _port, channel = served
    raw = channel.unary_unary(f"/{ENV_SERVICE}/Describe", request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as info:
        raw(INVALID_UTF8)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "does not parse as a protobuf message" in info.value.details()
    raw_stream = channel.unary_stream(f"/{LEARNER_SERVICE}/WatchJob", request_serializer=None,
                                      response_deserializer=None)
    with pytest.raises(grpc.RpcError) as info:
        list(raw_stream(INVALID_UTF8))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    raw_bidi = channel.stream_stream(f"/{ENV_SERVICE}/StreamSteps", request_serializer=None,
                                     response_deserializer=None)
    good = env_pb2.StepRequest(session_id="ab").SerializeToString()
    answers = raw_bidi(iter([good, INVALID_UTF8]))
    assert list(env_pb2.StepResponse.FromString(next(answers)).frames) == [2]
    with pytest.raises(grpc.RpcError) as info:
        next(answers)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_messages_over_the_servers_limit_are_refused_both_ways(served) -> None:
    """The fixture's server allows 2 MB; the client channel allows 64 MB, so the server's limit is what acts."""
    _port, channel = served
    stub = env_pb2_grpc.EnvServiceStub(channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.Describe(env_pb2.DescribeRequest(backend="y" * (3 * 1024 * 1024)))
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(grpc.RpcError) as info:
        stub.Describe(env_pb2.DescribeRequest(backend="big:3"))
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert len(stub.Describe(env_pb2.DescribeRequest(backend="big:1.5")).skill_api) == int(1.5 * 1024 * 1024)


def test_the_default_limit_carries_messages_over_grpcs_own_4_mb() -> None:
    server, port, _env = start()
    channel = create_channel(f"127.0.0.1:{port}", wait_ready_seconds=10)
    try:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        assert len(stub.Describe(env_pb2.DescribeRequest(backend="big:6")).skill_api) == 6 * 1024 * 1024
        assert stub.Describe(env_pb2.DescribeRequest(backend="z" * (6 * 1024 * 1024))).backend.startswith("zzz")
    finally:
        channel.close()
        stop_server(server, grace_seconds=0.5)


def test_stop_server_closes_servicers_and_refuses_new_calls() -> None:
    server, port, env = start()
    channel = create_channel(f"127.0.0.1:{port}", default_timeout=2, wait_ready_seconds=10)
    try:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        stub.Describe(env_pb2.DescribeRequest())
        stop_server(server, grace_seconds=0.5)
        assert env.closed.is_set()
        with pytest.raises(grpc.RpcError) as info:
            stub.Describe(env_pb2.DescribeRequest(), timeout=2)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        channel.close()


def test_an_address_that_cannot_be_bound_is_an_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=rf"could not bind the gRPC server to 127.0.0.1:{port}: the port is taken"):
            create_server(f"127.0.0.1:{port}", [])


def test_a_quiet_stream_survives_the_clients_keepalive_pings(served) -> None:
    """A client pinging a quiet stream (health Watch sends nothing after its first answer) is not sent away with
    GOAWAY "too_many_pings": the server accepts pings as often as the clients send them."""
    port, _channel = served
    # Pings every 500 ms: far more often than rlgpt's clients; by default the third one got GOAWAY.
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[
        ("grpc.keepalive_time_ms", 500), ("grpc.keepalive_timeout_ms", 2000),
        ("grpc.http2.max_pings_without_data", 0)])  # as a stream that gets data now and then: pings go on
    stream = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=6)
    try:
        assert next(stream).status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as info:
            next(stream)  # nothing more comes: the stream stays open until its deadline
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, info.value.details()
    finally:
        channel.close()
