"""The kept plan over a real gRPC channel: the "plan" action runs the first unfinished stage's skill, goes on to
the next within its K frames, keeps its place while the policy acts in between, and a failing plan skill ends
the plan action, not the episode."""

from __future__ import annotations

import grpc
import pytest
from env_server_support import rpc_error

from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.skills.reference import COLLECT_WOOD, PLACE_TABLE

pytestmark = pytest.mark.usefixtures("no_leftover_sessions")

TABLE_TASK = common_pb2.TaskSpec(name="place_table", terminate_on_success=True)
WOOD_3 = env_pb2.Stage(success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))])
TABLE = env_pb2.Stage(success=[common_pb2.Condition(achievement="place_table")])
STAGE_REWARD = common_pb2.RewardTerm(kind="stage", weight=1.0)


@pytest.fixture(scope="module")
def plan_skills(env_server) -> tuple[str, str]:
    for name, code in (("plan_wood", COLLECT_WOOD), ("plan_table", PLACE_TABLE)):
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))
    return "plan_wood", "plan_table"


def plan_session(stub, skills: tuple[str, ...], k: int, stages=(WOOD_3, TABLE)) -> env_pb2.CreateSessionResponse:
    return stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=3, task=TABLE_TASK, stages=list(stages), plan=list(skills), skill_max_steps=k,
        reward_terms=[STAGE_REWARD], autoreset=False))


def test_the_plan_runs_its_stages_in_order_and_keeps_its_place(env_server, plan_skills) -> None:
    stub = env_server.stub
    s = plan_session(stub, plan_skills, k=4)
    assert s.actions[-1] == "plan" and len(s.actions) == 18  # 17 primitives, then the plan
    plan, noop = 17, list(s.actions).index("noop")
    skills_run, stage_rewards = [], 0.0
    for _ in range(200):
        r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[plan]))
        info = r.infos[0]
        skills_run.append(info.skill)
        stage_rewards += r.rewards[0]
        assert not info.HasField("skill_error") and r.frames[0] <= 4
        if info.stages_done[0] and not info.stages_done[1]:
            # The policy acts in between: the plan keeps its place (stages are sticky, wood is not needed
            # to be held any more for the first stage to count as done).
            stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[noop]))
        if r.terminated[0]:
            break
    assert r.terminated[0] and info.end_reason == "success" and list(info.stages_done) == [True, True]
    first_table = skills_run.index("plan_table")
    assert set(skills_run[:first_table]) == {"plan_wood"} and set(skills_run[first_table:]) == {"plan_table"}
    assert stage_rewards == pytest.approx(2.0)  # the stage term pays each stage once


def test_one_plan_action_goes_on_to_the_next_stage_within_its_frames(env_server, plan_skills) -> None:
    stub = env_server.stub
    s = plan_session(stub, plan_skills, k=300)
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[17]))
    info = r.infos[0]
    assert r.terminated[0] and info.success and list(info.stages_done) == [True, True]
    assert info.skill == "plan_table" and r.frames[0] < 300  # wood, then the table, in one action


def test_a_failing_plan_skill_ends_the_plan_action_not_the_episode(env_server, plan_skills) -> None:
    stub = env_server.stub
    code = "def skill(agent):\n    yield 'noop'\n    raise ValueError('no tree in sight')\n"
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="plan_fails", code=code, replace=True))
    s = plan_session(stub, ("plan_fails", plan_skills[1]), k=10)
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[17]))
    info = r.infos[0]
    assert info.plan_error.type == "ValueError" and info.plan_error.line == 3
    assert info.plan_error.message.startswith("plan skill plan_fails: ")
    assert not info.HasField("skill_error") and not r.terminated[0] and not r.truncated[0]
    assert r.frames[0] == 1 and info.episode_steps == 1
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[17]))  # the plan tries again
    assert r.infos[0].plan_error.type == "ValueError" and r.infos[0].episode_steps == 2


def test_a_finished_plan_takes_one_frame(env_server, plan_skills) -> None:
    stub = env_server.stub
    open_task = common_pb2.TaskSpec(name="", start_inventory=[common_pb2.ItemCount(item="wood", count=5)])
    s = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, task=open_task, stages=[WOOD_3],
                                                        plan=[plan_skills[0]], skill_max_steps=8))
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[0]))
    assert list(r.infos[0].stages_done) == [True]
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[17]))
    assert r.frames[0] == 1 and r.infos[0].skill == "plan"


def test_bad_plans_are_refused_clearly(env_server, plan_skills) -> None:
    stub = env_server.stub
    code, details = rpc_error(stub.CreateSession, env_pb2.CreateSessionRequest(
        num_envs=1, stages=[WOOD_3], plan=list(plan_skills)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "plan names 2 skills and stages has 1 entries: a plan needs one skill per stage" in details
    code, details = rpc_error(stub.CreateSession, env_pb2.CreateSessionRequest(
        num_envs=1, stages=[WOOD_3], plan=["no_such_skill"]))
    assert code == grpc.StatusCode.NOT_FOUND and "no_such_skill" in details
    code, details = rpc_error(stub.CreateSession, env_pb2.CreateSessionRequest(
        num_envs=1, stages=[WOOD_3], plan=["x" * 100_000]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "plan[0]" in details and len(details) < 2000


def test_a_plan_skill_cut_at_k_frames_resumes_where_it_was(env_server, plan_skills) -> None:
    stub = env_server.stub
    code = ("def skill(agent):\n    for n in range(6):\n        yield 'noop'\n"
            "    raise ValueError('six frames done')\n")
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="plan_six", code=code, replace=True))
    s = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, task=TABLE_TASK, stages=[TABLE],
                                                        plan=["plan_six"], skills=[plan_skills[0]],
                                                        skill_max_steps=4))
    plan, noop, skill = len(s.actions) - 1, list(s.actions).index("noop"), len(s.actions) - 2

    def act(action: int) -> env_pb2.StepResponse:
        return stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[action]))

    assert act(plan).frames[0] == 4  # frames 1-4 of the plan skill, then it is suspended
    act(noop)  # the policy acts in between: the plan skill stays suspended
    r = act(plan)  # resumed: frames 5 and 6, then its error
    assert r.frames[0] == 2 and r.infos[0].plan_error.message == "plan skill plan_six: six frames done"
    assert act(plan).frames[0] == 4  # after an error the plan skill starts again
    assert act(skill).frames[0] >= 1  # a skill action in between runs beside the suspended plan skill
    r = act(plan)  # which goes on where it was: frames 5 and 6, then its error
    assert r.frames[0] == 2 and r.infos[0].plan_error.message.endswith("six frames done")


def test_run_skill_plays_an_all_code_chain_as_the_plan(env_server, plan_skills) -> None:
    stub = env_server.stub
    asked = env_pb2.RunSkillRequest(plan=list(plan_skills), stages=[WOOD_3, TABLE], episodes=2, max_steps=300, seed=3,
                                    task=common_pb2.TaskSpec(name="place_table"))
    r = stub.RunSkill(asked)
    assert r.success_rate == 1.0 and all(e.steps < 300 for e in r.episodes)
    # The same worlds and the same plan action as a session's plan stepped by a caller (a kept plan alone).
    s = plan_session(stub, plan_skills, k=300)
    step = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[17]))
    assert step.infos[0].episode_steps == r.episodes[0].steps
    # A skill that returns with its stage not done starts again; the chain ends once every stage is done.
    code = "def skill(agent):\n    yield 'noop'\n"
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="plan_idle", code=code, replace=True))
    idle = stub.RunSkill(env_pb2.RunSkillRequest(plan=["plan_idle"], stages=[TABLE], episodes=1, max_steps=20,
                                                 task=common_pb2.TaskSpec(name="place_table")))
    assert idle.episodes[0].steps == 20 and idle.episodes[0].end_reason == "time_limit"
    # How far each episode got through the chain: per stage, whether it was done (the planner's links).
    assert [list(e.stages_done) for e in r.episodes] == [[True, True]] * 2
    assert list(idle.episodes[0].stages_done) == [False]


def test_run_skill_refuses_a_skill_and_a_plan_together_and_a_plan_without_its_stages(env_server, plan_skills) -> None:
    code, details = rpc_error(env_server.stub.RunSkill, env_pb2.RunSkillRequest(
        skill=plan_skills[0], plan=list(plan_skills), stages=[WOOD_3, TABLE], episodes=1))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "not both" in details
    code, details = rpc_error(env_server.stub.RunSkill, env_pb2.RunSkillRequest(
        plan=list(plan_skills), stages=[WOOD_3], episodes=1))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "one skill per stage" in details
