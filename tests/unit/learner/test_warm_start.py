"""A training that starts from an earlier job's checkpoint (RLConfig.init_from_job): what refuses it, and the
checkpoint Sample Factory starts the new job from (the earlier weights, its own counters at 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlgpt.errors import FailedPrecondition
from rlgpt.v1 import common_pb2, learner_pb2
from services.learner.jobs import JobRecord
from services.learner.policy import ACTION_WEIGHT, VECTOR_WEIGHT, latest_checkpoint
from services.learner.warm_start import START_CHECKPOINT, space_differences, start_checkpoint, write_start_checkpoint

ACTIONS = ("noop", "move_left", "do")
LABELS = ("status/health", "inventory/wood")
WOOD = common_pb2.Condition(achievement="collect_wood")


def wood(**fields) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(**{"backend": "crafter", "skills": ["chop"], "env_frames": 1000, **fields})


def earlier_job(tmp_path: Path, state: int = learner_pb2.JOB_STATE_SUCCEEDED, saved: bool = True,
                vector: int = 2, actions: int = 4) -> JobRecord:
    """A job of ``wood()`` whose checkpoint (when ``saved``) was trained on ``vector`` entries and ``actions``."""
    job_dir = tmp_path / "job-old"
    if saved:
        folder = job_dir / "sf" / job_dir.name / "checkpoint_p0"
        folder.mkdir(parents=True)
        model = {VECTOR_WEIGHT: torch.ones(64, vector), ACTION_WEIGHT: torch.full((actions, 256), 0.5)}
        torch.save({"model": model, "optimizer": {"state": {}, "param_groups": []}, "train_step": 40,
                    "env_steps": 9000, "curr_lr": 0.5}, folder / "checkpoint_000000040_9000.pth")
    return JobRecord(job_id="job-old", job_dir=job_dir, config=wood(), state=state)


def test_the_same_spaces_written_otherwise_are_the_same() -> None:
    assert space_differences(wood(), wood(primitive_actions=list(ACTIONS), observe=["status", "inventory"],
                                          seed=9, reward_terms=[common_pb2.RewardTerm(kind="step")]),
                             ACTIONS, LABELS) == []


def test_every_difference_is_named_with_both_values() -> None:
    revised = wood(skills=["chop", "mine"], primitive_actions=["noop"], observe=["inventory"],
                   plan=[learner_pb2.PlanStep(skill="chop", success=[WOOD])])
    assert space_differences(wood(), revised, ACTIONS, LABELS) == [
        "the primitive actions differ (the job's: noop, move_left, do; this config's: noop)",
        "the skills differ (the job's: chop; this config's: chop, mine)",
        "the kept plans differ (the job's: none; this config's: chop)",
        "the observed vector entries differ (observe; the job's: all; this config's: inventory)"]


def test_a_fitting_job_gives_its_latest_checkpoint(tmp_path: Path) -> None:
    job = earlier_job(tmp_path)
    assert start_checkpoint(job, wood(learning_rate=1e-3), ACTIONS, LABELS, 2, 4) == latest_checkpoint(job.job_dir)


@pytest.mark.parametrize(("job", "config", "shapes", "needle"), [
    ({"state": learner_pb2.JOB_STATE_RUNNING}, wood(), (2, 4),
     "init_from_job='job-old': the job is JOB_STATE_RUNNING and its checkpoint still changes; stop it (StopJob)"),
    ({"saved": False}, wood(), (2, 4), "init_from_job='job-old': the job saved no checkpoint"),
    ({}, wood(skills=[]), (2, 3), "whose action or observation space is another: the skills differ (the job's: "
                                  "chop; this config's: none). Keep the job's spaces, or leave init_from_job empty"),
    ({"vector": 3}, wood(), (2, 4), "does not fit what the env serves now (a vector of 2 entries, 4 actions)"),
])
def test_what_stands_in_the_way_is_said(tmp_path: Path, job: dict, config: learner_pb2.RLConfig,
                                        shapes: tuple[int, int], needle: str) -> None:
    with pytest.raises(FailedPrecondition) as info:
        start_checkpoint(earlier_job(tmp_path, **job), config, ACTIONS, LABELS, *shapes)
    assert needle in str(info.value)


def test_the_new_job_starts_from_the_weights_and_counts_its_own_frames(tmp_path: Path) -> None:
    job = earlier_job(tmp_path)
    new_dir = tmp_path / "job-new"
    written = write_start_checkpoint(latest_checkpoint(job.job_dir), new_dir)
    assert written.name == START_CHECKPOINT and latest_checkpoint(new_dir) == written
    start = torch.load(written, weights_only=False)
    assert start["train_step"] == 0 and start["env_steps"] == 0 and "curr_lr" not in start  # the new config's rate
    assert torch.equal(start["model"][VECTOR_WEIGHT], torch.ones(64, 2))
    assert start["optimizer"] == {"state": {}, "param_groups": []}
    later = written.parent / "checkpoint_000000001_64.pth"  # what the training saves next sorts after it
    later.write_bytes(b"")
    assert latest_checkpoint(new_dir) == later
