"""A job's frame budget holds with macro actions behind a chain prefix, through the real env server and learner (the
bench-rlgpt overshoot: a job asked 10,000 frames trained 18,773): the rollout workers' envs count every frame, the
prefix's and the skills' included, stop stepping at the budget, and the job ends within one decision per env of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from learner_support import register_skills, watch_until_done

from rlgpt.v1 import common_pb2, learner_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.learner.frame_budget import spent_frames

pytestmark = pytest.mark.timeout(300)
IDLE = "def skill(agent):\n    while True:\n        yield 'noop'\n"
K = 25
"""A skill action's most frames (skill_max_steps): the idle skill always takes them all."""
PREFIX_IDLE = 20
PREFIX = [common_pb2.PrefixStep(skill="budget_wood", success=[common_pb2.Condition(
              inventory=common_pb2.ItemCount(item="wood", count=1))], max_frames=200),
          common_pb2.PrefixStep(skill="budget_idle", success=[common_pb2.Condition(achievement="collect_diamond")],
                                max_frames=PREFIX_IDLE)]
BUDGET = 2000
ENVS = 4
MARGIN = ENVS * (K + 200 + PREFIX_IDLE)
"""One decision per env: a skill's K frames, plus the prefix's (at most 220) where that step's autoreset ran it."""


@pytest.fixture(scope="module", autouse=True)
def skills(env_server) -> None:
    register_skills(env_server, {"budget_wood": COLLECT_WOOD, "budget_idle": IDLE})


def test_a_job_with_macro_actions_behind_a_prefix_stays_within_its_frame_budget(learner) -> None:
    config = learner_pb2.RLConfig(
        name="budget", backend="crafter", task=common_pb2.TaskSpec(name="collect_sapling"),
        primitive_actions=["noop", "do"], skills=["budget_idle"], skill_max_steps=K, episode_length=60,
        prefix=PREFIX, num_workers=2, envs_per_worker=2, seed=3, env_frames=BUDGET,
        reward_terms=[common_pb2.RewardTerm(kind="success", weight=1.0)])
    job_id = learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=config)).job_id
    final = watch_until_done(learner, job_id)[-1]
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED, final.message
    assert BUDGET <= final.env_frames <= BUDGET + MARGIN, final.env_frames
    # The envs' own count, read after every worker ended: nothing was spent past the margin after the last record.
    spent = spent_frames(Path(learner.settings.run_dir) / "jobs" / job_id)
    assert spent is not None and BUDGET <= spent <= BUDGET + MARGIN, spent
    assert final.env_frames <= spent  # the job's frames are the envs' count (steps after its last record aside)
