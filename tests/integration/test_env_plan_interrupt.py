"""Plan interrupts over a real gRPC channel: a plan action hands control back to the policy before its K frames
when the player is hurt or a threat comes near, its skill suspended and resumed by the next plan action."""

from __future__ import annotations

import grpc
import pytest
from env_server_support import rpc_error

from rlgpt.v1 import common_pb2, env_pb2

pytestmark = pytest.mark.usefixtures("no_leftover_sessions")

NEVER = env_pb2.Stage(success=[common_pb2.Condition(achievement="collect_diamond")])
IDLE = "def skill(agent):\n    while True:\n        yield 'noop'\n"
IDLE_100 = ("def skill(agent):\n    for n in range(100):\n        yield 'noop'\n"
            "    raise ValueError('idled 100 frames')\n")


@pytest.fixture(scope="module")
def idle_skills(env_server) -> None:
    for name, code in (("plan_idle", IDLE), ("plan_idle_100", IDLE_100)):
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))


def session(stub, skill: str, seed: int, interrupt: common_pb2.PlanInterrupt | None) -> env_pb2.CreateSessionResponse:
    return stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=seed, stages=[NEVER], plan=[skill], skill_max_steps=1000, plan_interrupt=interrupt))


@pytest.mark.usefixtures("idle_skills")
def test_a_plan_action_hands_control_back_when_the_player_is_hurt(env_server) -> None:
    stub = env_server.stub
    # Idling in world 2 the player is first hurt at frame 127 and killed at frame 153 (crafter 1.8.3).
    plain = session(stub, "plan_idle", 2, None)
    r = stub.Step(env_pb2.StepRequest(session_id=plain.session_id, actions=[len(plain.actions) - 1]))
    assert r.terminated[0] and r.infos[0].end_reason == "death" and r.infos[0].plan_interrupted == ""
    died_at = r.frames[0]

    s = session(stub, "plan_idle", 2, common_pb2.PlanInterrupt(damage=True))
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[len(s.actions) - 1]))
    assert r.infos[0].plan_interrupted == "damage" and not r.terminated[0]
    assert r.frames[0] < died_at and r.infos[0].episode_steps == r.frames[0]
    assert r.infos[0].skill == "plan_idle" and not r.infos[0].HasField("plan_error")


@pytest.mark.usefixtures("idle_skills")
def test_an_interrupted_plan_skill_resumes_where_it_was(env_server) -> None:
    stub = env_server.stub
    # In world 1 a zombie comes within 8 cells of an idle player at frame 30.
    s = session(stub, "plan_idle_100", 1, common_pb2.PlanInterrupt(threat_within=8))
    plan = len(s.actions) - 1
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[plan]))
    assert r.infos[0].plan_interrupted == "threat" and 1 <= r.frames[0] < 100
    reasons = []
    for _ in range(100):
        r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[plan]))
        reasons.append(r.infos[0].plan_interrupted)
        if r.infos[0].HasField("plan_error"):
            break
    # Resumed, not restarted: the skill's 100 frames in all (one more when its error came first in an action).
    assert r.infos[0].plan_error.message == "plan skill plan_idle_100: idled 100 frames"
    assert r.infos[0].episode_steps in (100, 101) and "threat" in reasons


@pytest.mark.usefixtures("idle_skills")
def play_plan(stub, interrupt: common_pb2.PlanInterrupt | None, skills: tuple[str, str] = ("plan_grass", "plan_idle"),
              k: int = 200, first: str = "sapling") -> tuple[env_pb2.StepInfo, list[str]]:
    """The plan alone (every action the plan action) in world 2 until the episode ends, its first stage one
    ``first`` item: its last step's info and why each plan action ended early."""
    stage = env_pb2.Stage(success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item=first, count=1))])
    s = stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=2, stages=[stage, NEVER], plan=list(skills), skill_max_steps=k,
        plan_interrupt=interrupt, record_trajectories=True, episode_length=400))
    reasons = []
    for _ in range(400):
        r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[len(s.actions) - 1]))
        reasons.append(r.infos[0].plan_interrupted)
        if r.terminated[0] or r.truncated[0]:
            return r.infos[0], reasons
    raise AssertionError("the episode did not end")


@pytest.mark.usefixtures("idle_skills")
def test_a_plan_with_interrupts_plays_as_one_without(env_server) -> None:
    stub = env_server.stub
    # The first skill goes on past its stage (a sapling, from the grass it faces) until it returns, as an
    # uninterrupted plan action lets it; an interrupt must not cut it short.
    code = "def skill(agent):\n    for n in range(180):\n        yield 'do'\n"
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="plan_grass", code=code, replace=True))
    plain, _ = play_plan(stub, None)
    interrupted, reasons = play_plan(stub, common_pb2.PlanInterrupt(damage=True, threat_within=4))
    assert {"damage", "threat"} <= set(reasons)  # it was interrupted, for both reasons
    assert interrupted.episode.text == plain.episode.text and interrupted.episode.steps == plain.episode.steps
    assert list(interrupted.episode.achievements) == list(plain.episode.achievements)


def at_two_ks(stub, name: str, code: str, short: int) -> env_pb2.StepInfo:
    """The plan (``name``, then idling) alone at K=200 and at K=``short``: the same episode; its last info."""
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))
    long_k, _ = play_plan(stub, None, (name, "plan_idle"), k=200)
    short_k, _ = play_plan(stub, None, (name, "plan_idle"), k=short)
    assert short_k.episode.text == long_k.episode.text and short_k.episode.steps == long_k.episode.steps
    assert short_k.skill == long_k.skill
    return long_k


@pytest.mark.usefixtures("idle_skills")
def test_a_plan_plays_the_same_at_any_k(env_server) -> None:
    # The first skill goes on past its stage (a sapling) until it returns: K ends plan actions, not the skill.
    info = at_two_ks(env_server.stub, "plan_grass", "def skill(agent):\n    for n in range(180):\n        yield 'do'\n",
                     short=5)
    assert "collect_sapling" in info.episode.achievements


@pytest.mark.usefixtures("idle_skills")
def test_a_plan_skill_that_never_returns_is_stopped_long_after_its_stage(env_server) -> None:
    info = at_two_ks(env_server.stub, "plan_grass_forever", "def skill(agent):\n    while True:\n        yield 'do'\n",
                     short=7)
    # The test server's plan_skill_overtime is 60 frames: then the plan moves on to the idle skill.
    assert "collect_sapling" in info.episode.achievements and info.skill == "plan_idle"


@pytest.mark.usefixtures("idle_skills")
def test_a_skill_that_gives_up_after_an_interrupt_costs_no_extra_frame(env_server) -> None:
    stub = env_server.stub
    # Gives up (returns, its stage not done) once hurt since it started: right after the interrupt, before acting
    # again; started afresh it acts again.
    code = "def skill(agent):\n    start = agent.health\n    while agent.health >= start:\n        yield 'do'\n"
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="plan_until_hurt", code=code, replace=True))
    skills = ("plan_until_hurt", "plan_idle")
    plain, _ = play_plan(stub, None, skills, k=50, first="diamond")
    interrupted, reasons = play_plan(stub, common_pb2.PlanInterrupt(damage=True), skills, k=50, first="diamond")
    assert "damage" in reasons
    assert interrupted.episode.text == plain.episode.text and interrupted.episode.steps == plain.episode.steps


@pytest.mark.usefixtures("idle_skills")
def test_bad_interrupts_are_refused_clearly(env_server) -> None:
    stub = env_server.stub
    code, details = rpc_error(stub.CreateSession, env_pb2.CreateSessionRequest(
        num_envs=1, plan_interrupt=common_pb2.PlanInterrupt(damage=True)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "plan_interrupt" in details and "needs a plan" in details
    limit = stub.Describe(env_pb2.DescribeRequest()).limits.max_threat_distance
    far = common_pb2.PlanInterrupt(threat_within=limit + 1)
    code, details = rpc_error(stub.CreateSession, env_pb2.CreateSessionRequest(
        num_envs=1, stages=[NEVER], plan=["plan_idle"], plan_interrupt=far))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"plan_interrupt.threat_within={limit + 1} must be in 1..{limit}" in details


def test_describe_names_what_can_hurt_the_player(env_server) -> None:
    answer = env_server.stub.Describe(env_pb2.DescribeRequest())
    assert list(answer.threats) == ["zombie", "skeleton", "arrow"]
    assert answer.limits.max_threat_distance == 8
