"""A kept plan's policy steps (PlanStep.job_id) before any session: which jobs are refused and why, the checkpoints
that do not fit, the pinned copies a job reads, and the session config that serves every policy."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlgpt.errors import FailedPrecondition, NotFound
from rlgpt.v1 import common_pb2, learner_pb2
from services.learner.jobs import JobRecord
from services.learner.plan_links import check_link_fits, pin_links, pinned_links, resolve_links, session_config
from services.learner.plan_progress import step_name
from services.learner.policy import ACTION_WEIGHT, VECTOR_WEIGHT
from services.learner.rl_config import EnvVocabulary, step_problems

PRIMITIVES = ("noop", "move_left", "do")
WOOD = [common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))]


def kept(*steps: learner_pb2.PlanStep, **fields) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(backend="crafter", plan=list(steps), env_frames=1000, **fields)


def link_job(tmp_path: Path, job_id: str = "link", state: int = learner_pb2.JOB_STATE_SUCCEEDED, saved: bool = True,
             actions: int = 3, **fields) -> JobRecord:
    """A trained link: primitives noop and do, skill chop (3 actions), its checkpoint trained on ``actions``."""
    job_dir = tmp_path / job_id
    config = learner_pb2.RLConfig(**{"backend": "crafter", "primitive_actions": ["noop", "do"], "skills": ["chop"],
                                     **fields})
    if saved:
        folder = job_dir / "sf" / job_id / "checkpoint_p0"
        folder.mkdir(parents=True)
        model = {VECTOR_WEIGHT: torch.ones(64, 2), ACTION_WEIGHT: torch.ones(actions, 256)}
        torch.save({"model": model}, folder / "checkpoint_000000010_500.pth")
    return JobRecord(job_id=job_id, job_dir=job_dir, config=config, state=state)


def jobs(*records: JobRecord):
    known = {r.job_id: r for r in records}

    def get(job_id: str) -> JobRecord:
        if job_id not in known:
            raise NotFound(f"no job {job_id!r}")
        return known[job_id]
    return get


def test_a_policy_step_resolves_to_its_jobs_latest_checkpoint(tmp_path: Path) -> None:
    record = link_job(tmp_path)
    config = kept(learner_pb2.PlanStep(skill="wood", success=WOOD), learner_pb2.PlanStep(job_id="link", success=WOOD))
    (link,) = resolve_links(config, jobs(record))
    assert (link.step, link.job_id, link.config) == (1, "link", record.config)
    assert link.checkpoint.name == "checkpoint_000000010_500.pth"
    assert [step_name(s) for s in config.plan] == ["wood", "policy:link"]
    assert resolve_links(kept(learner_pb2.PlanStep(skill="wood", success=WOOD)), jobs()) == []


@pytest.mark.parametrize(("record", "error", "needle"), [
    (None, NotFound, "plan[0].job_id='link': no such job on this learner"),
    ({"state": learner_pb2.JOB_STATE_RUNNING}, FailedPrecondition, "the job is JOB_STATE_RUNNING and its checkpoint "
                                                                   "still changes"),
    ({"saved": False}, FailedPrecondition, "the job saved no checkpoint"),
    ({"plan": [learner_pb2.PlanStep(skill="wood", success=WOOD)]}, FailedPrecondition, "keeps a plan of its own"),
    ({"backend": "minedojo"}, FailedPrecondition, "the job trained on 'minedojo', this config on 'crafter'"),
])
def test_a_step_naming_an_unusable_job_is_refused_saying_why(tmp_path: Path, record, error, needle) -> None:
    known = () if record is None else (link_job(tmp_path, **record),)
    with pytest.raises(error) as refused:
        resolve_links(kept(learner_pb2.PlanStep(job_id="link", success=WOOD)), jobs(*known))
    assert needle in str(refused.value)


def test_a_checkpoint_that_does_not_fit_the_env_is_refused_naming_its_step(tmp_path: Path) -> None:
    links = resolve_links(kept(learner_pb2.PlanStep(job_id="link", success=WOOD)), jobs(link_job(tmp_path, actions=5)))
    with pytest.raises(FailedPrecondition, match=r"plan\[0\].job_id='link': checkpoint .* does not fit .* 3 actions"):
        check_link_fits(links, 2, PRIMITIVES)
    check_link_fits(resolve_links(kept(learner_pb2.PlanStep(job_id="link", success=WOOD)),
                                  jobs(link_job(tmp_path / "fits"))), 2, PRIMITIVES)
    with pytest.raises(FailedPrecondition, match="a vector of 3 entries"):
        check_link_fits(links, 3, PRIMITIVES)


def test_pinned_links_are_the_copies_the_job_reads(tmp_path: Path) -> None:
    config = kept(learner_pb2.PlanStep(skill="wood", success=WOOD), learner_pb2.PlanStep(job_id="link", success=WOOD))
    links = resolve_links(config, jobs(link_job(tmp_path)))
    pin_links(links, tmp_path / "kept")
    (pinned,) = pinned_links(tmp_path / "kept", config)
    assert pinned.checkpoint == tmp_path / "kept" / "plan_links" / "1" / "checkpoint.pth"
    assert (pinned.step, pinned.job_id, pinned.config) == (1, "link", links[0].config)
    assert torch.load(pinned.checkpoint)["model"][ACTION_WEIGHT].shape == (3, 256)
    with pytest.raises(FailedPrecondition, match=r"the policy of plan\[1\] \(job 'link'\) is missing"):
        pinned_links(tmp_path / "other", config)


def test_the_session_serves_every_policys_actions_and_observations(tmp_path: Path) -> None:
    step = learner_pb2.PlanStep(job_id="link", success=WOOD)
    own = kept(step, primitive_actions=["noop", "move_left"], skills=["own"], observe=["inventory"])
    links = resolve_links(own, jobs(link_job(tmp_path, observe=["inventory"])))
    served = session_config(own, links)
    assert list(served.primitive_actions) == ["noop", "move_left", "do"] and list(served.skills) == ["own", "chop"]
    assert list(served.observe) == ["inventory"]  # the same entries: the env server masks them for both
    assert list(own.skills) == ["own"]  # the config itself is left as it was
    other = resolve_links(own, jobs(link_job(tmp_path / "b", primitive_actions=[], observe=["status"])))
    served = session_config(own, other)
    assert list(served.primitive_actions) == [] and list(served.observe) == []  # all: each policy masked apart
    assert session_config(own, []) is own


def test_a_plan_step_is_a_skill_or_a_job_not_both() -> None:
    vocabulary = EnvVocabulary(backend="crafter", actions=PRIMITIVES, achievements=(), items=("wood",),
                               reward_kinds=(), skills=("wood",), max_skill_steps=64, max_episode_length=1000,
                               max_envs_per_session=8)
    assert step_problems("plan[0]", learner_pb2.PlanStep(job_id="link", success=WOOD), vocabulary) == []
    assert step_problems("plan[0]", learner_pb2.PlanStep(skill="wood", job_id="link", success=WOOD), vocabulary) == [
        "plan[0]: set skill (a coded step) or job_id (a trained policy's step), not both"]
    assert step_problems("plan[0]", learner_pb2.PlanStep(success=WOOD), vocabulary) == [
        "plan[0].skill: empty; name the registered coded skill that does this step (or the training job whose "
        "policy does it: job_id)"]
    assert step_problems("prefix[0]", common_pb2.PrefixStep(success=WOOD), vocabulary) == [
        "prefix[0].skill: empty; name the registered coded skill that does this step"]
