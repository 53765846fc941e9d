"""Load on a real env server over loopback (issue 38, item 5): as many StreamSteps clients as the server's stream
limit (one per session: its default 32 sessions, with the default 16 threads for unary calls) are each served,
while health answers within 1 s and Describe answers throughout; one stream more is RESOURCE_EXHAUSTED at once,
and a stream that ends gives its slot back."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from probe_support import Probe

from rlgpt.config import ServerSettings
from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.v1 import env_pb2, env_pb2_grpc
from services.env_server.servicer import SERVICE_NAME, EnvServicer
from services.env_server.settings import EnvServerSettings

pytestmark = pytest.mark.timeout(420)
SERVED_WITHIN = 120.0
"""Seconds every client gets for its first step on 2 shared cores (a starved stream never gets one)."""
HEALTH_WITHIN = 1.0


class Client:
    """One StreamSteps call of one session on a channel of its own; steps in lockstep."""

    def __init__(self, target: str, session_id: str):
        self.channel = create_channel(target)
        self.session_id = session_id
        self._requests: queue.SimpleQueue[env_pb2.StepRequest | None] = queue.SimpleQueue()
        self._responses = env_pb2_grpc.EnvServiceStub(self.channel).StreamSteps(
            iter(self._requests.get, None), timeout=SERVED_WITHIN + 120)

    def step(self) -> env_pb2.StepResponse:
        self._requests.put(env_pb2.StepRequest(session_id=self.session_id, actions=[0]))
        return next(self._responses)

    def close(self) -> None:
        self._requests.put(None)
        self._responses.cancel()
        self.channel.close()


@pytest.fixture
def loaded_server() -> Iterator[tuple[str, EnvServerSettings]]:
    """A real env server with the default thread pool and session limit."""
    defaults = ServerSettings()
    settings = EnvServerSettings(max_envs_per_session=1, session_idle_seconds=600)
    servicer = EnvServicer(settings)
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(SERVICE_NAME, env_pb2_grpc.add_EnvServiceServicer_to_server, servicer)],
        max_workers=defaults.max_workers, max_streams=defaults.max_streams, metrics_label="env-load")
    try:
        yield f"127.0.0.1:{port}", settings
    finally:
        servicer.close()
        stop_server(server, grace_seconds=1)


def test_as_many_streams_as_sessions_are_served_and_health_answers_throughout(loaded_server) -> None:
    target, settings = loaded_server
    channel = create_channel(target)
    stub = env_pb2_grpc.EnvServiceStub(channel)
    sessions = [stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=i), timeout=60).session_id
                for i in range(settings.max_sessions)]
    probe = Probe(target)
    probe.start()
    clients = [Client(target, session_id) for session_id in sessions]
    served = threading.Barrier(len(clients) + 1)
    problems: list[str] = []

    def play(client: Client) -> None:
        try:
            client.step()
            served.wait(timeout=SERVED_WITHIN)  # every stream is open and was served before any steps on
            for _ in range(3):
                client.step()
        except (grpc.RpcError, threading.BrokenBarrierError) as exc:
            problems.append(f"{client.session_id}: {type(exc).__name__} {getattr(exc, 'code', lambda: '')()}")
            served.abort()

    threads = [threading.Thread(target=play, args=(client,), daemon=True) for client in clients]
    try:
        for thread in threads:
            thread.start()
        try:
            served.wait(timeout=SERVED_WITHIN)
        except threading.BrokenBarrierError:
            pytest.fail(f"not every stream was served within {SERVED_WITHIN:.0f} s: {problems[:4]}; health: "
                        f"{probe.failures[:4]}")
        # Every slot is taken: one stream more (a second one on a session) is refused at once, not queued.
        extra = Client(target, sessions[0])
        start = time.perf_counter()
        with pytest.raises(grpc.RpcError) as info:
            extra.step()
        extra.close()
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"at most {settings.max_sessions} streams" in info.value.details()
        assert time.perf_counter() - start < 5
        for thread in threads:
            thread.join(timeout=SERVED_WITHIN)
        assert not problems
    finally:
        for client in clients:
            client.close()
        probe.stop.set()
        probe.join(timeout=30)
    assert not probe.failures, probe.failures[:5]
    assert probe.health_seconds and max(probe.health_seconds) < HEALTH_WITHIN, max(probe.health_seconds)
    assert probe.describe_seconds, "Describe was never answered"
    # The limit is the env server's, reported where clients read its limits; the ended streams gave their slots back.
    limits = stub.Describe(env_pb2.DescribeRequest(), timeout=30).limits
    assert limits.max_streams == settings.max_sessions == len(clients)
    deadline = time.monotonic() + 10  # a cancelled stream's slot comes back when grpc has ended the call
    while True:
        again = Client(target, sessions[0])
        try:
            assert len(again.step().rewards) == 1
            break
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
        finally:
            again.close()
    channel.close()
