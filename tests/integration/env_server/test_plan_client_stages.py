"""A kept plan with a stage the client plays (an empty name in CreateSessionRequest.plan: a trained policy's step,
which the learner runs) over a real gRPC channel: the plan action ends where that stage is the first unfinished
one, takes one noop frame when it starts there, goes on with the next coded stage once the client got it done,
and stops (does not resume) a skill suspended before the client's stage; RunSkill's plan has no such stage."""

from __future__ import annotations

import grpc
import pytest
from env_server_support import rpc_error

from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.skills.reference import COLLECT_WOOD, PLACE_TABLE

pytestmark = pytest.mark.usefixtures("no_leftover_sessions")


def chop_one(then_wait: bool) -> str:
    """A skill that chops one wood and returns, or then waits (noops) for good."""
    wait = "    while True:\n        yield 'noop'\n" if then_wait else ""
    return ("def skill(agent):\n    while agent.inventory['wood'] < 1:\n        action = agent.step_to('tree')\n"
            "        yield action if action is not None else 'do'\n" + wait)


TABLE_TASK = common_pb2.TaskSpec(name="place_table", terminate_on_success=True)


def wood(count: int) -> env_pb2.Stage:
    return env_pb2.Stage(success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=count))])


STAGES = [wood(1), wood(3), env_pb2.Stage(success=[common_pb2.Condition(achievement="place_table")])]


@pytest.fixture(scope="module", autouse=True)
def skills(env_server) -> None:
    for name, code in (("client_one_wood", chop_one(False)), ("client_wait", chop_one(True)),
                       ("client_wood", COLLECT_WOOD), ("client_table", PLACE_TABLE)):
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))


def session(stub, first: str, k: int) -> tuple[env_pb2.CreateSessionResponse, int, int]:
    """Stage 0 coded (``first``), stage 1 the client's, stage 2 coded; the client's skill action and the plan's."""
    s = stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=3, task=TABLE_TASK, stages=STAGES, plan=[first, "", "client_table"],
        skills=["client_wood"], skill_max_steps=k, autoreset=False))
    actions = list(s.actions)
    return s, actions.index("skill:client_wood"), actions.index("plan")


def step(stub, s: env_pb2.CreateSessionResponse, action: int) -> env_pb2.StepResponse:
    return stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[action]))


def test_the_plan_hands_over_at_the_clients_stage_and_goes_on_after_it(env_server) -> None:
    stub = env_server.stub
    s, client_skill, plan = session(stub, "client_one_wood", k=300)
    r = step(stub, s, plan)  # stage 0's skill, then the client's stage: the action ends there
    assert list(r.infos[0].stages_done) == [True, False, False] and r.infos[0].skill == "client_one_wood"
    assert 0 < r.frames[0] < 300 and not r.terminated[0]
    r = step(stub, s, plan)  # a plan action at the client's stage: one noop frame, nothing run
    assert r.frames[0] == 1 and r.infos[0].skill == "plan" and list(r.infos[0].stages_done) == [True, False, False]
    r = step(stub, s, client_skill)  # the client plays its stage (here with a skill action)
    assert list(r.infos[0].stages_done) == [True, True, False]
    r = step(stub, s, plan)  # the next coded stage
    assert r.infos[0].skill == "client_table" and r.terminated[0] and r.infos[0].end_reason == "success"


def test_a_skill_suspended_before_the_clients_stage_is_not_resumed_after_it(env_server) -> None:
    stub = env_server.stub
    s, client_skill, plan = session(stub, "client_wait", k=8)
    for _ in range(40):  # stage 0's skill gets its wood, then waits on: suspended at K past its done stage
        r = step(stub, s, plan)
        if r.infos[0].stages_done[0]:
            break
    assert list(r.infos[0].stages_done) == [True, False, False] and r.frames[0] == 8
    r = step(stub, s, client_skill)
    assert list(r.infos[0].stages_done) == [True, True, False]
    r = step(stub, s, plan)  # the waiting skill is stopped: the table's skill runs at once
    assert r.infos[0].skill == "client_table"


def test_run_skill_refuses_a_plan_with_a_clients_stage(env_server) -> None:
    code, details = rpc_error(env_server.stub.RunSkill, env_pb2.RunSkillRequest(
        plan=["client_one_wood", ""], stages=STAGES[:2], episodes=1, task=TABLE_TASK))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "plan[1] is empty" in details
