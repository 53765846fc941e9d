"""A chain of controllers evaluated by the real learner over a real env server: a coded link, then a policy
link of a tiny real Sample Factory training (the session's ``wood_job``, which test_learner checks); and the
planner's final evaluation of an all-code chain (the env server's plan) and of a chain with that policy, on the
same worlds."""

from __future__ import annotations

import grpc
import pytest
from learner_support import register_skills

from rlgpt import worlds
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.context import RunContext, Stubs
from services.planner.controller import CHAIN_CONTROLLER, final_evaluation
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import Decision, RunState, Status

pytestmark = pytest.mark.timeout(300)
WOOD = common_pb2.Condition(achievement="collect_wood")
THREE_WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))
TASK = common_pb2.TaskSpec(name="three_wood", success=[THREE_WOOD], terminate_on_success=True)
# Stops at one wood, so that the policy link has the rest of the task to do.
ONE_WOOD = """\
def skill(agent):
    while agent.inventory["wood"] < 1:
        action = agent.step_to("tree")
        yield action if action is not None else "do"
"""


@pytest.fixture(scope="module", autouse=True)
def skills(env_server) -> None:
    """This file's skills, registered on the session's env server (which the session's learner uses)."""
    register_skills(env_server, {"learn_wood": COLLECT_WOOD, "one_wood": ONE_WOOD})


@pytest.fixture(scope="module")
def job_id(wood_job) -> str:
    """The session's wood training (test_learner checks the training itself): a policy to chain."""
    job, progress = wood_job
    final = progress[-1]
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED, final.message
    return job


def test_a_skill_link_then_a_policy_link(learner, job_id: str) -> None:
    chain = [learner_pb2.ChainLink(name="first wood", skill="one_wood", success=[WOOD], max_frames=100),
             learner_pb2.ChainLink(name="three wood", job_id=job_id, success=[THREE_WOOD], max_frames=100)]
    reply = learner.stub.Evaluate(learner_pb2.EvaluateRequest(chain=chain, task=TASK, episodes=4, seed=2,
                                                              episode_length=150, frames_per_episode=2), timeout=240)
    assert [s.name for s in reply.links] == ["first wood", "three wood"]
    first, second = reply.links
    assert first.reached == 4 and 0 < first.succeeded <= 4 and first.mean_frames > 0
    assert second.reached == first.succeeded and second.succeeded <= second.reached  # one wood never ends the task
    assert second.mean_frames > 0  # the policy acted
    assert len(reply.episodes) == len(reply.returns) == len(reply.frames) == 4
    assert all(e.text.startswith("start:") and 0 < e.steps <= 150 for e in reply.episodes)
    assert reply.success_rate == pytest.approx(sum(e.success for e in reply.episodes) / 4)
    assert all(1 <= len(f.png) <= 2 for f in reply.frames)
    greedy = learner.stub.Evaluate(learner_pb2.EvaluateRequest(chain=chain, task=TASK, episodes=4, seed=2,
                                                               episode_length=150, greedy=True), timeout=240)
    assert greedy.links[0].reached == 4 and len(greedy.episodes) == 4  # policies on their most probable actions


def test_links_done_at_the_start_are_passed_at_once(learner) -> None:
    one = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=1))
    task = common_pb2.TaskSpec(name="three_wood", success=[THREE_WOOD], terminate_on_success=True,
                               start_inventory=[common_pb2.ItemCount(item="wood", count=1)])
    chain = [learner_pb2.ChainLink(name="one wood", skill="one_wood", success=[one]),
             learner_pb2.ChainLink(name="three wood", skill="learn_wood", success=[THREE_WOOD], max_frames=120)]
    reply = learner.stub.Evaluate(learner_pb2.EvaluateRequest(chain=chain, task=task, episodes=3, seed=5,
                                                              episode_length=150), timeout=120)
    first, second = reply.links
    assert (first.reached, first.succeeded, first.mean_frames) == (3, 3, 0.0)  # held from the start inventory
    assert second.reached == 3 and second.succeeded > 0 and second.mean_frames > 0
    assert reply.success_rate >= second.succeeded / 3 - 1e-6  # the task is the last stage (or held later)


@pytest.mark.parametrize(("link", "code", "needle"), [
    (learner_pb2.ChainLink(name="ghost", job_id="no-such-job"), grpc.StatusCode.NOT_FOUND, "no-such-job"),
    (learner_pb2.ChainLink(name="ghost", skill="no_such_skill"), grpc.StatusCode.NOT_FOUND, "no_such_skill"),
    (learner_pb2.ChainLink(name="nothing"), grpc.StatusCode.INVALID_ARGUMENT, "set its controller"),
    (learner_pb2.ChainLink(name="bad", skill="one_wood", success=[common_pb2.Condition(achievement="fly")]),
     grpc.StatusCode.INVALID_ARGUMENT, "unknown achievement 'fly'"),
])
def test_bad_chains_are_refused_with_a_reason(learner, link, code, needle: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.Evaluate(learner_pb2.EvaluateRequest(chain=[link], task=TASK, episodes=1), timeout=60)
    assert info.value.code() == code and needle in info.value.details()


class Recorded:
    """A stub whose every call's request and response are kept (``calls``: (method, request, response))."""

    def __init__(self, stub) -> None:
        self._stub, self.calls = stub, []

    def __getattr__(self, name: str):
        def call(request, **kwargs):
            response = getattr(self._stub, name)(request, **kwargs)
            self.calls.append((name, request, response))
            return response

        return call


def final_of(tmp_path, env_server, learner, *, policy: str) -> tuple[Recorded, Recorded, dict]:
    """The planner's final evaluation of a two-sub-task plan on the whole task (run seed 7): both sub-tasks coded,
    or with ``policy`` the second one that trained job; the stubs it called, recorded, and its result."""
    plan = planner_pb2.Plan(subtasks=[
        planner_pb2.SubTask(name="first_wood", success=[WOOD], decision=planner_pb2.DECISION_CODE),
        planner_pb2.SubTask(name="three_wood", success=[THREE_WOOD],
                            decision=planner_pb2.DECISION_RL if policy else planner_pb2.DECISION_CODE)])
    state = RunState()
    state.set_plan(plan)
    state.subtasks["first_wood"].status, state.subtasks["first_wood"].skill_code = Status.DONE, ONE_WOOD
    second = state.subtasks["three_wood"]
    second.status, second.skill_code = Status.DONE, COLLECT_WOOD
    if policy:
        second.decision, second.job_id, second.rl_config = Decision.RL, policy, {"episode_length": 100}
    (tmp_path / "run").mkdir(parents=True)
    run = Run(tmp_path / "run", planner_pb2.StartRunRequest(task=TASK, seed=7,
                                                            budgets=planner_pb2.Budgets(eval_episodes=4)))
    env, learned = Recorded(env_server.stub), Recorded(learner.stub)
    ctx = RunContext.create(run, state, env_server.stub.Describe(env_pb2.DescribeRequest()),
                            Stubs(env=env, learner=learned, critic=None), SkillLibrary(tmp_path / "library.json"),
                            PlannerSettings(test_steps=100, final_episode_frames=150, eval_episodes=8))
    return env, learned, final_evaluation(ctx).as_json()


def test_every_controller_s_final_evaluation_plays_the_same_worlds(tmp_path, env_server, learner, job_id) -> None:
    env, _, code = final_of(tmp_path / "code", env_server, learner, policy="")
    _, learned, mixed = final_of(tmp_path / "mixed", env_server, learner, policy=job_id)
    assert code["controller"] == CHAIN_CONTROLLER and not code.get("error")
    assert mixed["controller"].startswith("chain: first_wood (code) -> three_wood (policy") and not mixed.get("error")
    (_, ran, played), = [c for c in env.calls if c[0] == "RunSkill"]  # the env server's plan, no policy
    (_, asked, evaluated), = [c for c in learned.calls if c[0] == "Evaluate"]  # the learner's chain
    assert len(ran.plan) == 2 and not ran.skill and len(asked.chain) == 2
    assert ran.seed == asked.seed == worlds.final_worlds(7) and ran.episodes == asked.episodes == 4
    # The same worlds, seen in the episodes themselves: each episode starts where its pair does.
    starts = [[e.text.splitlines()[0] for e in r.episodes] for r in (played, evaluated)]
    assert starts[0] == starts[1] and len(set(starts[0])) > 1
