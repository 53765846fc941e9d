"""Long unary calls on a real env server over loopback (issue 38): RunSkill calls of a slow skill, as many at once as
the server's whole thread pool holds and more. As many as it serves at once (max_skill_tests) run to their end;
every other is refused at once with RESOURCE_EXHAUSTED naming the limit and saying to retry later; health answers
within 1 s and Describe throughout (the old server queued them for its threads, a RunSkill waited up to 30 s for a
test slot on a thread, and health waited behind them). A client that waits when busy (the planner's) is served once
a slot is free, the slots come back, and Describe reports the limit."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
from probe_support import Probe

from rlgpt import metrics
from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc
from services.env_server.servicer import SERVICE_NAME, EnvServicer
from services.env_server.settings import EnvServerSettings

pytestmark = pytest.mark.timeout(300)
WORKERS, STREAMS = 4, 2
"""The server's threads for short unary calls (RLGPT_MAX_WORKERS) and streams of health's Watch and of reflection
(RLGPT_MAX_STREAMS): few, so that the pool is small."""
SLOW_SKILL = ("def skill(agent):\n    while True:\n        n = 0\n        for i in range(100000):\n            n += i\n"
              "        yield 'noop'\n")
"""Tens of milliseconds a frame: a 60-frame test runs for seconds."""
TEST = env_pb2.RunSkillRequest(skill="slow", episodes=1, max_steps=60, task=common_pb2.TaskSpec(
    name="wood", success=[common_pb2.Condition(achievement="collect_wood")]))
HEALTH_WITHIN = 1.0


@pytest.fixture
def busy_server() -> Iterator[tuple[str, EnvServerSettings]]:
    """A real env server of 8 sessions (4 RunSkill calls at once) and WORKERS threads for short calls, the slow
    skill registered."""
    settings = EnvServerSettings(max_sessions=8, max_envs_per_session=1, skill_probe_seconds=1.0)
    servicer = EnvServicer(settings)
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(SERVICE_NAME, env_pb2_grpc.add_EnvServiceServicer_to_server, servicer)],
        max_workers=WORKERS, max_streams=STREAMS, metrics_label="env-long")
    target = f"127.0.0.1:{port}"
    with create_channel(target, default_timeout=60) as channel:
        env_pb2_grpc.EnvServiceStub(channel).RegisterSkill(env_pb2.RegisterSkillRequest(name="slow", code=SLOW_SKILL))
    try:
        yield target, settings
    finally:
        servicer.close()
        stop_server(server, grace_seconds=1)


def refused() -> float:
    return metrics.GRPC_REQUESTS.labels("env-long", "RunSkill", "RESOURCE_EXHAUSTED")._value.get()


def test_long_calls_past_their_limit_are_refused_and_health_answers_throughout(busy_server) -> None:
    target, settings = busy_server
    at_once = settings.max_skill_tests
    pool = WORKERS + settings.max_streams + 2 * STREAMS + at_once  # every thread the server has
    probe = Probe(target)
    probe.start()
    plain = grpc.insecure_channel(target)  # a client that takes a refusal as the answer
    waiting = create_channel(target, default_timeout=120, wait_when_busy=True)  # the planner's kind
    before = refused()
    try:
        time.sleep(1)  # the probe's first answers, on an idle server
        start = time.perf_counter()
        calls = [env_pb2_grpc.EnvServiceStub(plain).RunSkill.future(TEST, timeout=120) for _ in range(pool + 4)]
        # The waiting client asks once every plain call has been admitted or refused: sent together, it could take a
        # slot before the last plain calls arrive (CI saw 3 plain calls served, not 4).
        deadline = time.monotonic() + 60
        while sum(call.done() for call in calls) < len(calls) - at_once and time.monotonic() < deadline:
            time.sleep(0.01)
        patient = env_pb2_grpc.EnvServiceStub(waiting).RunSkill.future(TEST)
        errors = [call.exception(timeout=120) for call in calls]
        served = patient.result(timeout=120)  # asked again until a slot was free
        seconds = time.perf_counter() - start
    finally:
        probe.stop.set()
        probe.join(timeout=30)
        plain.close()
        waiting.close()
    assert not probe.failures, probe.failures[:5]
    assert probe.health_seconds and max(probe.health_seconds) < HEALTH_WITHIN, max(probe.health_seconds)
    assert len(probe.describe_seconds) >= 2, "Describe was not answered throughout"
    codes = [error.code() if error is not None else grpc.StatusCode.OK for error in errors]
    assert codes.count(grpc.StatusCode.OK) == at_once, codes
    assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == len(calls) - at_once, codes
    refusals = [e for e in errors if e is not None]
    assert all(e.details() == refusals[0].details() for e in refusals)
    assert refusals[0].details() == (f"EnvService serves at most {at_once} RunSkill calls at once, each on a thread "
                                     "of its own (this one would be one more); retry later, once one of them has "
                                     "ended")
    assert len(served.episodes) == 1 and served.episodes[0].steps == TEST.max_steps
    assert seconds < 100
    assert refused() - before >= len(calls) - at_once  # counted as the calls they are (rlgpt_grpc_requests_total)
    with create_channel(target, default_timeout=60) as channel:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        # The slots came back; the limit is reported where clients read the server's limits.
        assert len(stub.RunSkill(TEST).episodes) == 1
        assert dict(stub.Describe(env_pb2.DescribeRequest()).limits.requests.calls_at_once) == {"RunSkill": at_once,
                                                                                     "RegisterSkill": at_once}
