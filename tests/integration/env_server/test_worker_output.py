"""What a skill's sandbox worker hands back, over a real gRPC channel (issue 38, items 1, 2 and 9): text that UTF-8
cannot encode (a lone surrogate) reaches no answer, a worker's stderr is kept within a bounded number of bytes, an
InvalidAction names what the skill yielded without a module path or an address, and Reset refuses repeated
env_indices as Step does. The server is healthy after each."""

from __future__ import annotations

import os
import time

import grpc
import pytest
from env_server_support import assert_healthy, rpc_error

from rlgpt.v1 import common_pb2, env_pb2

pytestmark = pytest.mark.usefixtures("no_leftover_sessions")

N_PRIMITIVES = 17  # Crafter's actions come first in a session's action space, then its skills in order
# Acts once, so registration's test run passes, then raises a message UTF-8 cannot encode.
SURROGATE_AFTER_ACTING = "def skill(agent):\n    yield 'noop'\n    raise ValueError('gave up ' + chr(55296))\n"
# Fails on its first resume: registration refuses it and quotes the error.
SURROGATE_AT_ONCE = "def skill(agent):\n    assert agent.steps < 0, 'bad ' + chr(55296)\n    yield 'noop'\n"
"""A failed assert (a code error; a skill's own raise is it giving up, which registration accepts) whose message
holds the lone surrogate itself."""
# Each inner generator is dropped while suspended, so its finalizer's 5 MB error goes to the worker's stderr.
LOUD_FINALIZERS = '''
def skill(agent):
    def loud():
        try:
            yield 1
        finally:
            raise ValueError("x" * 5000000)
    for _ in range(16):
        inner = loud()
        next(inner)
        inner = None
    while True:
        yield "noop"
'''
YIELDS_THE_AGENT = "def skill(agent):\n    yield 'noop'\n    yield agent\n"
REPLACEMENT = "\N{REPLACEMENT CHARACTER}"


def register(env_server, name: str, code: str) -> None:
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))


def skill_session(env_server, name: str, steps: int = 5) -> str:
    return env_server.stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=3, skills=[name], skill_max_steps=steps)).session_id


def step_skill(env_server, session_id: str) -> env_pb2.StepResponse:
    return env_server.stub.Step(env_pb2.StepRequest(session_id=session_id, actions=[N_PRIMITIVES]))


# --- text UTF-8 cannot encode ------------------------------------------------------------------------------
def test_a_lone_surrogate_in_a_skill_error_is_replaced_in_step(env_server) -> None:
    register(env_server, "surrogate_step", SURROGATE_AFTER_ACTING)
    error = step_skill(env_server, skill_session(env_server, "surrogate_step")).infos[0].skill_error
    assert (error.type, error.message, error.line) == ("ValueError", f"gave up {REPLACEMENT}", 3)
    assert_healthy(env_server)


def test_a_lone_surrogate_in_a_skill_error_is_replaced_in_stream_steps(env_server) -> None:
    register(env_server, "surrogate_stream", SURROGATE_AFTER_ACTING)
    session_id = skill_session(env_server, "surrogate_stream")
    requests = [env_pb2.StepRequest(session_id=session_id, actions=[N_PRIMITIVES])] * 2
    answers = list(env_server.stub.StreamSteps(iter(requests)))
    assert [a.infos[0].skill_error.message for a in answers] == [f"gave up {REPLACEMENT}"] * 2
    assert_healthy(env_server)


def test_a_lone_surrogate_in_a_skill_error_is_replaced_in_run_skill(env_server) -> None:
    register(env_server, "surrogate_run", SURROGATE_AFTER_ACTING)
    answer = env_server.stub.RunSkill(env_pb2.RunSkillRequest(skill="surrogate_run", episodes=1, max_steps=20))
    assert answer.episodes[0].error.message == f"gave up {REPLACEMENT}"
    assert_healthy(env_server)


def test_a_lone_surrogate_in_a_plan_skill_error_is_replaced(env_server) -> None:
    register(env_server, "surrogate_plan", SURROGATE_AFTER_ACTING)
    stage = env_pb2.Stage(success=[common_pb2.Condition(achievement="place_table")])
    session = env_server.stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=3, stages=[stage], plan=["surrogate_plan"], skill_max_steps=5))
    step = env_server.stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=[N_PRIMITIVES]))
    assert step.infos[0].plan_error.message == f"plan skill surrogate_plan: gave up {REPLACEMENT}"
    assert_healthy(env_server)


def test_a_lone_surrogate_in_a_registration_test_error_keeps_the_real_message(env_server) -> None:
    status, details = rpc_error(env_server.stub.RegisterSkill,
                                env_pb2.RegisterSkillRequest(name="surrogate_probe", code=SURROGATE_AT_ONCE))
    assert status == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.endswith(f"AssertionError at line 2: bad {REPLACEMENT} [assert agent.steps < 0, 'bad ' + "
                            "chr(55296)]"), details
    assert_healthy(env_server)


# --- what the server keeps of a worker -----------------------------------------------------------------------
def resident_mb() -> float:
    """This process's resident memory (the env server runs in it), in MiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_a_skill_cannot_grow_what_the_server_keeps_of_its_worker_stderr(env_server) -> None:
    register(env_server, "loud_finalizers", LOUD_FINALIZERS)
    session_id = skill_session(env_server, "loud_finalizers", steps=2)
    before = resident_mb()
    step = step_skill(env_server, session_id)  # the worker writes 16 errors of 5 MB to its stderr
    assert not step.infos[0].HasField("skill_error"), step.infos[0].skill_error
    time.sleep(1)  # the server reads the last of it
    assert resident_mb() - before < 40
    from services.env_server.skills.stderr_tail import STDERR_TAIL_BYTES

    kept = env_server.servicer.sessions.get(session_id)._executor._process.stderr_tail.lines()
    assert any(line.startswith("ValueError: xxxx") for line in kept), kept[-5:]
    assert sum(len(line.encode()) for line in kept) <= STDERR_TAIL_BYTES
    assert_healthy(env_server)


# --- InvalidAction names what was yielded --------------------------------------------------------------------
def test_an_invalid_action_names_what_was_yielded_without_an_address(env_server) -> None:
    status, details = rpc_error(env_server.stub.RegisterSkill,
                                env_pb2.RegisterSkillRequest(name="yields_agent", code=YIELDS_THE_AGENT))
    assert status == grpc.StatusCode.INVALID_ARGUMENT
    assert "InvalidAction at line 3: yielded the agent object, which is not an action name; valid: noop," in details
    assert "0x" not in details and "services." not in details
    assert_healthy(env_server)


# --- Reset checks env_indices as Step does -----------------------------------------------------------------
def test_reset_refuses_repeated_env_indices_as_step_does(env_server) -> None:
    session_id = env_server.stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2, seed=3)).session_id
    reset = rpc_error(env_server.stub.Reset, env_pb2.ResetRequest(session_id=session_id, env_indices=[1, 0, 1]))
    step = rpc_error(env_server.stub.Step, env_pb2.StepRequest(session_id=session_id, actions=[0, 0, 0],
                                                               env_indices=[1, 0, 1]))
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    assert reset == (invalid, "env_indices repeats [1]: each env is reset at most once per call")
    assert step == (invalid, "env_indices repeats [1]: each env is stepped at most once per call")
    assert_healthy(env_server)
