"""RL around a kept plan whose middle step is a trained policy (PlanStep.job_id), through the real env server and a
real Sample Factory training: the env server runs the coded steps and hands over at the policy's, the learner runs
that policy (the session's wood training, with its own macro action) inside the plan action, its checkpoint pinned
into the new job; the plan alone is evaluated step by step; unknown and unusable jobs are refused at
StartTraining."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from learner_support import register_skills, watch_until_done

from rlgpt.v1 import common_pb2, learner_pb2
from services.env_server.skills.reference import PLACE_TABLE

pytestmark = pytest.mark.timeout(600)
ONE_WOOD = ("def skill(agent):\n    while agent.inventory['wood'] < 1:\n        action = agent.step_to('tree')\n"
            "        yield action if action is not None else 'do'\n")


def wood(count: int) -> list[common_pb2.Condition]:
    return [common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=count))]


def plan(policy_job: str) -> list[learner_pb2.PlanStep]:
    """One wood by code, two more by the trained policy, then the table by code."""
    return [learner_pb2.PlanStep(skill="steps_one_wood", success=wood(1)),
            learner_pb2.PlanStep(job_id=policy_job, success=wood(3)),
            learner_pb2.PlanStep(skill="steps_table", success=[common_pb2.Condition(achievement="place_table")])]


def kept_config(steps: list[learner_pb2.PlanStep], frames: int = 2000) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(
        name="table_around_a_policy", task=common_pb2.TaskSpec(name="place_table", terminate_on_success=True),
        primitive_actions=["noop", "do"], plan=steps, skill_max_steps=16, plan_prior=0.8, episode_length=300,
        env_frames=frames, num_workers=2, envs_per_worker=2, seed=7,
        reward_terms=[common_pb2.RewardTerm(kind="stage", weight=1.0),
                      common_pb2.RewardTerm(kind="success", weight=5.0)])


@pytest.fixture(scope="module")
def kept_job(env_server, learner, wood_job) -> tuple[str, str, list[learner_pb2.JobProgress]]:
    """The wood policy's job, and a real training around a plan with it as its middle step."""
    register_skills(env_server, {"steps_one_wood": ONE_WOOD, "steps_table": PLACE_TABLE})
    policy_job, _ = wood_job
    job_id = learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=kept_config(plan(policy_job)))).job_id
    return policy_job, job_id, watch_until_done(learner, job_id)


def test_a_plan_with_a_policy_step_trains_with_the_policy_pinned(learner, kept_job) -> None:
    policy_job, job_id, progress = kept_job
    assert progress[-1].state == learner_pb2.JOB_STATE_SUCCEEDED, progress[-1].message
    assert progress[-1].env_frames >= 2000 and "plan" in progress[-1].action_shares
    (info,) = [j for j in learner.stub.ListJobs(learner_pb2.ListJobsRequest()).jobs if j.job_id == job_id]
    assert info.config.plan[1].job_id == policy_job and not info.config.plan[1].skill
    assert (Path(info.job_dir) / "plan_links" / "1" / "checkpoint.pth").is_file()


def test_the_plan_alone_runs_the_policy_step_between_the_coded_ones(learner, kept_job) -> None:
    policy_job, job_id, _ = kept_job
    asked = learner_pb2.EvaluateRequest(job_id=job_id, episodes=4, seed=11, plan_alone=True)
    alone = [learner.stub.Evaluate(asked, timeout=300) for _ in range(2)]
    one_wood, by_policy, table = alone[0].links
    assert [link.name for link in alone[0].links] == ["steps_one_wood", f"policy:{policy_job}", "steps_table"]
    assert one_wood.reached == 4 and by_policy.reached == one_wood.succeeded > 0
    assert by_policy.mean_frames > 0 and table.reached == by_policy.succeeded > 0  # the policy did its step
    assert table.succeeded == sum(e.success for e in alone[0].episodes)
    assert dict(alone[0].action_shares) == {"plan": 1.0}  # no action but the plan's, the policy's inside it
    # The same worlds, the link policy's sampling seeded by them: the plan alone plays each episode the same way.
    assert [(e.steps, e.success) for e in alone[0].episodes] == [(e.steps, e.success) for e in alone[1].episodes]
    policy = learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=4, seed=11), timeout=300)
    assert len(policy.episodes) == 4 and set(policy.action_shares) <= {"noop", "do", "plan"}


def test_a_policy_step_naming_an_unknown_or_unusable_job_is_refused(learner, kept_job) -> None:
    _, job_id, _ = kept_job
    for named, code, needle in (
            ("no-such-job", grpc.StatusCode.NOT_FOUND, "plan[1].job_id='no-such-job': no such job on this learner"),
            (job_id, grpc.StatusCode.FAILED_PRECONDITION, "the job keeps a plan of its own")):
        with pytest.raises(grpc.RpcError) as refused:
            learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=kept_config(plan(named), 500)))
        assert refused.value.code() == code and needle in refused.value.details()
