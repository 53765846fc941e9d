"""Kept-plan steps played by trained policies (``PlanStep.job_id``: an RL link of the chain): the jobs they name,
checked at StartTraining, pinned into the new job's directory, and the env session that serves every policy.

A policy step names a finished, stopped or failed job of this learner (NOT_FOUND otherwise) that keeps no plan of
its own, trained on the same backend and saved a checkpoint (FAILED_PRECONDITION otherwise); that checkpoint must
fit the env's spaces now (:func:`check_link_fits`). When the job starts, the link's latest checkpoint and config
are copied into ``<job>/plan_links/<step>/`` (:func:`pin_links`): the training, its resumes and its evaluations
all run that policy, whatever the link's own job does later (a continued training deletes old checkpoints), and a
Kubernetes Job finds it in the job's directory it mounts.

The env server runs the coded steps (its plan names a policy step with an empty name) and judges every step's
conditions; the learner runs the policies (:mod:`services.learner.plan_session`). Their session holds what every
policy acts with (:func:`session_config`): the links' skills after the job's own, every primitive where one of them
names fewer than another, every vector entry where their ``observe`` differ (each policy then sees its own)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from google.protobuf import json_format

from rlgpt.errors import FailedPrecondition, NotFound, shown
from rlgpt.v1 import learner_pb2
from services.learner.jobs import JobRecord
from services.learner.policy import check_fits, latest_checkpoint
from services.learner.spaces import job_actions
from services.learner.warm_start import CONTINUABLE


@dataclasses.dataclass(frozen=True)
class PlanLink:
    """One policy step of a kept plan: where its config (``directory/config.json``) and checkpoint lie."""

    step: int
    """Its index in the plan (``RLConfig.plan``)."""
    job_id: str
    config: learner_pb2.RLConfig
    """The link job's own config: its action space and what it observes."""
    directory: Path
    checkpoint: Path


LINKS_DIR = "plan_links"
"""Under a job's directory, one folder per policy step (its index in the plan): config.json and checkpoint.pth."""
PINNED_CHECKPOINT = "checkpoint.pth"
"""The pinned checkpoint's name in its folder."""


def resolve_links(config: learner_pb2.RLConfig, job: Callable[[str], JobRecord]) -> list[PlanLink]:
    """The policy steps of ``config``'s plan, each checked: its job known (``job`` raises NotFound), no longer
    training, keeping no plan of its own, of the config's backend and with a checkpoint; the first problem raised
    with the step it is in."""
    links = []
    for j, step in enumerate(config.plan):
        if not step.job_id:
            continue
        where = f"plan[{j}].job_id={shown(step.job_id)}"
        try:
            record = job(step.job_id)
        except NotFound:
            raise NotFound(f"{where}: no such job on this learner; name a finished training's job id (ListJobs shows "
                           "them)") from None
        if record.state not in CONTINUABLE:
            raise FailedPrecondition(f"{where}: the job is {learner_pb2.JobState.Name(record.state)} and its "
                                     "checkpoint still changes; wait until it ends or stop it (StopJob)")
        if record.config.plan:
            raise FailedPrecondition(f"{where}: the job keeps a plan of its own; a plan step's policy acts alone")
        if record.config.backend != config.backend:
            raise FailedPrecondition(f"{where}: the job trained on {shown(record.config.backend)}, this config on "
                                     f"{shown(config.backend)}; one session runs one backend")
        try:
            checkpoint = latest_checkpoint(record.job_dir)
        except FailedPrecondition:
            raise FailedPrecondition(f"{where}: the job saved no checkpoint (it ended before its first save); "
                                     "train it longer") from None
        links.append(PlanLink(step=j, job_id=step.job_id, config=record.config, directory=record.job_dir,
                              checkpoint=checkpoint))
    return links


def check_link_fits(links: Sequence[PlanLink], vector: int, primitives: Sequence[str]) -> None:
    """Each link's checkpoint fits what the env serves now: a vector of ``vector`` entries and the link job's
    actions (``primitives``: every primitive of the backend); FailedPrecondition names the step otherwise."""
    import torch

    for link in links:
        weights = torch.load(link.checkpoint, map_location="cpu", weights_only=False)["model"]
        try:
            check_fits(link.directory, link.checkpoint, weights, vector, len(job_actions(link.config, primitives)))
        except FailedPrecondition as exc:
            raise FailedPrecondition(f"plan[{link.step}].job_id={shown(link.job_id)}: {exc}") from None


def pin_links(links: Sequence[PlanLink], job_dir: Path) -> None:
    """Copies each link's config and checkpoint into ``job_dir`` (:data:`LINKS_DIR`), where the job reads them."""
    for link in links:
        target = job_dir / LINKS_DIR / str(link.step)
        target.mkdir(parents=True, exist_ok=True)
        doc = {"config": json_format.MessageToDict(link.config), "job_id": link.job_id,
               "checkpoint": str(link.checkpoint)}
        (target / "config.json").write_text(json.dumps(doc, indent=2))
        shutil.copyfile(link.checkpoint, target / PINNED_CHECKPOINT)


def pinned_links(job_dir: Path, config: learner_pb2.RLConfig) -> list[PlanLink]:
    """The links :func:`pin_links` copied into ``job_dir``, one per policy step of ``config``'s plan;
    FailedPrecondition when one is missing (a job directory written before policy steps, or damaged)."""
    links = []
    for j, step in enumerate(config.plan):
        if not step.job_id:
            continue
        directory = job_dir / LINKS_DIR / str(j)
        if not (directory / PINNED_CHECKPOINT).is_file():
            raise FailedPrecondition(f"job {job_dir.name}: the policy of plan[{j}] (job {shown(step.job_id)}) is "
                                     f"missing from {directory}; train the kept plan again")
        link_config = json_format.ParseDict(json.loads((directory / "config.json").read_text())["config"],
                                            learner_pb2.RLConfig())
        links.append(PlanLink(step=j, job_id=step.job_id, config=link_config, directory=directory,
                              checkpoint=directory / PINNED_CHECKPOINT))
    return links


def _union(lists: Sequence[Sequence[str]]) -> list[str]:
    return list(dict.fromkeys(name for names in lists for name in names))


def session_config(config: learner_pb2.RLConfig, links: Sequence[PlanLink]) -> learner_pb2.RLConfig:
    """The config whose session serves ``config``'s policy and its plan's ``links``: the links' skills after the
    config's own; the links' primitives too, or every primitive where one of them names none; every vector entry
    where one observes other entries than the config. ``config`` itself when there are no links."""
    if not links:
        return config
    served = learner_pb2.RLConfig()
    served.CopyFrom(config)
    served.skills[:] = _union([config.skills, *(link.config.skills for link in links)])
    primitives = [config.primitive_actions, *(link.config.primitive_actions for link in links)]
    served.primitive_actions[:] = _union(primitives) if all(primitives) else []
    if any(sorted(link.config.observe) != sorted(config.observe) for link in links):
        served.observe[:] = []
    return served
