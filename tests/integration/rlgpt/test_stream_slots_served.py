"""Every server's streams are bounded (rlgpt.grpc_server, issue 38 item 5): a service that declares no
``max_streams`` (the planner's WatchRun, the learner's WatchJob, health's Watch) serves the server's ``max_streams``
at once and refuses one more with RESOURCE_EXHAUSTED at once, while unary calls keep their own threads; a stream
that ends gives its slot back. Over a real channel, with health's Watch as the long-lived stream."""

from __future__ import annotations

import time

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import create_server, stop_server

pytestmark = pytest.mark.timeout(120)


def test_streams_past_the_limit_are_refused_and_unary_calls_still_answer() -> None:
    server, port = create_server("127.0.0.1:0", [], max_workers=1, max_streams=2, metrics_label="slots")
    channel = create_channel(f"127.0.0.1:{port}")
    stub = health_pb2_grpc.HealthStub(channel)
    watch = health_pb2.HealthCheckRequest(service="")
    try:
        open_streams = [stub.Watch(watch, timeout=60) for _ in range(2)]
        for stream in open_streams:
            assert next(stream).status == health_pb2.HealthCheckResponse.SERVING
        start = time.perf_counter()
        with pytest.raises(grpc.RpcError) as info:
            next(stub.Watch(watch, timeout=60))
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert info.value.details() == (f"{health.SERVICE_NAME.rsplit('.', 1)[-1]} serves at most 2 streams at once "
                                        "(this Watch would be one more); close one or retry later")
        for _ in range(5):  # the unary thread is free: Check answers at once, again and again
            assert stub.Check(watch, timeout=1).status == health_pb2.HealthCheckResponse.SERVING
        assert time.perf_counter() - start < 5
        open_streams[0].cancel()
        deadline = time.monotonic() + 10
        while True:  # the cancelled stream's slot comes back once grpc has ended the call
            try:
                assert next(stub.Watch(watch, timeout=60)).status == health_pb2.HealthCheckResponse.SERVING
                break
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        open_streams[1].cancel()
    finally:
        channel.close()
        stop_server(server, grace_seconds=1)
