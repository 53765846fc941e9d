"""RL around a kept plan (RLConfig.plan): real Sample Factory through a real env server, the plan's skills
doing the sub-tasks in order while the policy learns when to let them act. One training (``plan_job``) serves
the tests that read a trained plan job; the session's learner is shared with the other test_learner* files."""

from __future__ import annotations

import grpc
import pytest
from learner_support import register_skills, watch_until_done

from rlgpt.v1 import common_pb2, learner_pb2
from services.env_server.skills.reference import COLLECT_WOOD, PLACE_TABLE

pytestmark = pytest.mark.timeout(600)


def plan_config(frames: int, plan: list[learner_pb2.PlanStep]) -> learner_pb2.RLConfig:
    # Two primitives that cannot place a table on their own: the plan has to do it.
    return learner_pb2.RLConfig(
        name="table", task=common_pb2.TaskSpec(name="place_table", terminate_on_success=True),
        primitive_actions=["noop", "do"], plan=plan, skill_max_steps=16, episode_length=300, env_frames=frames,
        num_workers=2, envs_per_worker=2, seed=5,
        reward_terms=[common_pb2.RewardTerm(kind="stage", weight=1.0),
                      common_pb2.RewardTerm(kind="success", weight=5.0)])


def table_plan() -> list[learner_pb2.PlanStep]:
    wood = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))
    return [learner_pb2.PlanStep(skill="kept_wood", success=[wood]),
            learner_pb2.PlanStep(skill="kept_table", success=[common_pb2.Condition(achievement="place_table")])]


@pytest.fixture(scope="module", autouse=True)
def skills(env_server) -> None:
    """The plan's skills, registered on the session's env server (which the session's learner uses)."""
    register_skills(env_server, {"kept_wood": COLLECT_WOOD, "kept_table": PLACE_TABLE})


@pytest.fixture(scope="module")
def plan_job(learner) -> tuple[str, learner_pb2.JobProgress]:
    """This file's one real training around the kept plan (1500 frames): its id and its last progress."""
    job_id = learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=plan_config(1500, table_plan()))).job_id
    return job_id, watch_until_done(learner, job_id)[-1]


def test_rl_around_a_kept_plan_trains_and_evaluates(learner, plan_job) -> None:
    job_id, final = plan_job
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED, final.message
    assert final.skill_frame_fraction > 0.3  # the plan action is a macro action: its frames are counted so
    assert final.success_rate > 0  # noop and do alone never place a table
    evaluation = learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=4, seed=1), timeout=300)
    assert len(evaluation.episodes) == 4 and evaluation.success_rate > 0
    chain = [learner_pb2.ChainLink(name="table", job_id=job_id)]
    with pytest.raises(grpc.RpcError) as refused:
        learner.stub.Evaluate(learner_pb2.EvaluateRequest(chain=chain, episodes=1,
                                                          task=common_pb2.TaskSpec(name="place_table")))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "keeps a plan of its own; evaluate it alone" in refused.value.details()


def test_a_bad_plan_is_refused_with_every_problem(learner) -> None:
    plan = [learner_pb2.PlanStep(skill="no_such_skill", success=[common_pb2.Condition(achievement="fly")]),
            learner_pb2.PlanStep(skill="kept_table")]
    with pytest.raises(grpc.RpcError) as refused:
        learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=plan_config(1000, plan)))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = refused.value.details()
    assert "plan[0].skill: unknown skill 'no_such_skill'" in details
    assert "plan[0].success: unknown achievement 'fly'" in details
    assert "plan[1].success: empty" in details


def test_evaluating_a_plan_job_reports_how_far_its_episodes_got(learner, plan_job) -> None:
    job_id, final = plan_job
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED
    evaluation = learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=4, seed=2), timeout=300)
    wood, table = evaluation.links
    assert (wood.name, table.name) == ("kept_wood", "kept_table") and wood.reached == 4
    assert table.reached == wood.succeeded and table.succeeded == sum(e.success for e in evaluation.episodes)
    assert wood.succeeded == 0 or wood.mean_frames > 0
    # What the policy chose: shares of its decisions over the four episodes, among the job's own actions.
    shares = dict(evaluation.action_shares)
    assert shares and set(shares) <= {"plan", *plan_config(600, table_plan()).primitive_actions}
    assert sum(shares.values()) == pytest.approx(1.0)
    greedy = learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=4, seed=2, greedy=True),
                                   timeout=300)  # the policy's most probable actions: the same worlds played again
    assert len(greedy.episodes) == 4 and [link.name for link in greedy.links] == ["kept_wood", "kept_table"]
    # The plan alone on the same worlds: no policy acts, so the same seed plays every episode the same way.
    alone = [learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=4, seed=2, plan_alone=True),
                                   timeout=300) for _ in range(2)]
    assert [(e.steps, e.success) for e in alone[0].episodes] == [(e.steps, e.success) for e in alone[1].episodes]
    assert alone[0].links[0].reached == 4 and alone[0].success_rate > 0  # the reference skills place tables
    with pytest.raises(grpc.RpcError) as refused:
        learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=1, plan_alone=True, greedy=True))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "plan_alone" in refused.value.details()
