"""A channel that knows its peer (``create_channel(peer=...)``, issue 38 item 6) turns a peer that is gone or does
not answer in time into ServiceFailed, naming the service and its address, on unary calls and server streams; the
peer's own answers, a DEADLINE_EXCEEDED about the work included, stay grpc.RpcError. Over real channels."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import grpc
import pytest

from rlgpt import errors
from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.v1 import learner_pb2, learner_pb2_grpc

pytestmark = pytest.mark.timeout(60)
SERVICE = learner_pb2.DESCRIPTOR.services_by_name["LearnerService"].full_name


class Peer(learner_pb2_grpc.LearnerServiceServicer):
    """StopJob(job_id="sleep:S") answers after S seconds, "work-timeout" answers DEADLINE_EXCEEDED at once (a skill
    that ran out of time), "depends" UNAVAILABLE (a service it needs is gone); WatchJob yields one record, then
    sleeps ``job_id`` seconds."""

    @errors.grpc_errors
    def StopJob(self, request: learner_pb2.StopJobRequest, context: grpc.ServicerContext) -> learner_pb2.JobInfo:
        kind, _, value = request.job_id.partition(":")
        if kind == "sleep":
            time.sleep(float(value))
        if kind == "work-timeout":
            raise errors.DeadlineExceeded("skill 'x' failed on test world 0 after 3 steps: Timeout")
        if kind == "depends":
            raise errors.Unavailable("env server at 10.0.0.1:1 did not answer")
        return learner_pb2.JobInfo(job_id=request.job_id)

    @errors.grpc_errors
    def WatchJob(self, request: learner_pb2.WatchJobRequest,
                 context: grpc.ServicerContext) -> Iterator[learner_pb2.JobProgress]:
        yield learner_pb2.JobProgress(job_id=request.job_id)
        time.sleep(float(request.job_id))


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(SERVICE, learner_pb2_grpc.add_LearnerServiceServicer_to_server, Peer())],
        max_workers=4, metrics_label="peer-test")
    yield f"127.0.0.1:{port}"
    stop_server(server, grace_seconds=0.5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_peer_that_is_not_there_is_named_with_its_address() -> None:
    address = f"127.0.0.1:{free_port()}"
    with create_channel(address, default_timeout=10, peer="learner") as channel, \
            pytest.raises(errors.ServiceFailed) as info:
        learner_pb2_grpc.LearnerServiceStub(channel).StopJob(learner_pb2.StopJobRequest(job_id="a"))
    assert str(info.value).startswith(f"the learner at {address} is unavailable (StopJob: UNAVAILABLE: failed to "
                                      "connect to all addresses")
    assert (info.value.service, info.value.address, info.value.method) == ("learner", address, "StopJob")
    assert info.value.code == grpc.StatusCode.UNAVAILABLE  # an RlgptError: a servicer answers it as UNAVAILABLE


def test_a_peer_that_does_not_answer_in_time_is_named_and_its_own_answers_stay_rpc_errors(target) -> None:
    with create_channel(target, default_timeout=0.5, peer="learner") as channel:
        stub = learner_pb2_grpc.LearnerServiceStub(channel)
        with pytest.raises(errors.ServiceFailed) as info:
            stub.StopJob(learner_pb2.StopJobRequest(job_id="sleep:3"))
        assert str(info.value) == f"the learner at {target} did not answer StopJob within its deadline of 0.5 s"
        with pytest.raises(errors.ServiceFailed, match=r"within its deadline of 1.2 s"):
            stub.StopJob(learner_pb2.StopJobRequest(job_id="sleep:3"), timeout=1.2)
        with pytest.raises(errors.ServiceFailed, match=r"is unavailable \(StopJob: UNAVAILABLE: env server at "
                                                       r"10\.0\.0\.1:1 did not answer\)"):
            stub.StopJob(learner_pb2.StopJobRequest(job_id="depends"), timeout=20)  # retried, then answered
        with pytest.raises(grpc.RpcError) as answered:  # the peer's verdict on the work: not a failed service
            stub.StopJob(learner_pb2.StopJobRequest(job_id="work-timeout"), timeout=20)
        assert answered.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert stub.StopJob(learner_pb2.StopJobRequest(job_id="ok")).job_id == "ok"


def test_a_server_stream_names_its_peer_when_it_times_out(target) -> None:
    with create_channel(target, default_timeout=30, peer="learner") as channel:
        stream = learner_pb2_grpc.LearnerServiceStub(channel).WatchJob(learner_pb2.WatchJobRequest(job_id="5"),
                                                                       timeout=1)
        assert next(iter(stream)).job_id == "5"
        with pytest.raises(errors.ServiceFailed, match=f"the learner at {target} did not answer WatchJob within"):
            next(stream)
        stream.cancel()  # the call's own methods pass through


def test_a_channel_without_a_peer_raises_rpc_errors_as_before() -> None:
    with create_channel(f"127.0.0.1:{free_port()}", default_timeout=10) as channel, \
            pytest.raises(grpc.RpcError) as info:
        learner_pb2_grpc.LearnerServiceStub(channel).StopJob(learner_pb2.StopJobRequest(job_id="a"))
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
