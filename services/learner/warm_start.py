"""A training that starts from an earlier job's weights (``RLConfig.init_from_job``): whether they fit the new job,
and the starting checkpoint the learner writes into the new job's directory.

Sample Factory (2.1.1) starts a training from the latest ``checkpoint_*.pth`` in its experiment's ``checkpoint_p0``
(``--restart_behavior=resume``): its model, optimizer, ``train_step`` and ``env_steps``. The new job's directory
gets a copy of the earlier job's latest checkpoint with both counters at 0 and no learning rate of its own, so the
training starts from the earlier weights (and the optimizer's moments) with the new config's learning rate, and
counts its own frames: its env_frames budget is not eaten by the earlier job's. The copy lies in the job's
directory, which a Kubernetes Job mounts as a local process sees it: both runners start from it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from rlgpt.errors import FailedPrecondition, shown
from rlgpt.observation_choice import observed
from rlgpt.v1 import learner_pb2
from services.learner.jobs import JobRecord
from services.learner.plan_progress import step_name
from services.learner.policy import check_fits, latest_checkpoint

log = logging.getLogger(__name__)
START_CHECKPOINT = "checkpoint_000000000_0.pth"
"""The starting checkpoint's name: Sample Factory's ``checkpoint_<train_step>_<env_steps>`` at 0 and 0, so every
checkpoint the new training saves sorts after it."""
CONTINUABLE = {learner_pb2.JOB_STATE_SUCCEEDED, learner_pb2.JOB_STATE_STOPPED, learner_pb2.JOB_STATE_FAILED}
"""States of a job whose checkpoint no longer changes."""


def _shown(values: Sequence[str]) -> str:
    return ", ".join(values) if values else "none"


def space_differences(earlier: learner_pb2.RLConfig, config: learner_pb2.RLConfig, primitives: Sequence[str],
                      vector_labels: Sequence[str]) -> list[str]:
    """What makes ``config``'s action or observation space another than ``earlier``'s: the backend, its primitive
    actions (none listed: all of ``primitives``), skills, kept plan (its skills and policies in order) and observed
    vector entries (``vector_labels`` chosen by ``observe``), each named with both values."""
    pairs = {
        "backends": ([earlier.backend], [config.backend]),
        "primitive actions": (list(earlier.primitive_actions or primitives),
                              list(config.primitive_actions or primitives)),
        "skills": (list(earlier.skills), list(config.skills)),
        "kept plans": ([step_name(s) for s in earlier.plan], [step_name(s) for s in config.plan]),
    }
    differences = [f"the {what} differ (the job's: {_shown(old)}; this config's: {_shown(new)})"
                   for what, (old, new) in pairs.items() if old != new]
    chosen = (list(earlier.observe), list(config.observe))
    if observed(vector_labels, chosen[0])[0] != observed(vector_labels, chosen[1])[0]:
        old, new = (", ".join(c) if c else "all" for c in chosen)
        differences.append(f"the observed vector entries differ (observe; the job's: {old}; this config's: {new})")
    return differences


def start_checkpoint(earlier: JobRecord, config: learner_pb2.RLConfig, primitives: Sequence[str],
                     vector_labels: Sequence[str], vector: int, actions: int) -> Path:
    """The checkpoint of ``earlier`` (a finished or stopped job) that a training of ``config`` starts from, once its
    weights fit: the same spaces (:func:`space_differences`) and the shapes the env serves now (``vector``
    entries, ``actions``); FailedPrecondition says what stands in the way."""
    import torch

    where = f"init_from_job={shown(earlier.job_id)}"
    if earlier.state not in CONTINUABLE:
        raise FailedPrecondition(f"{where}: the job is {learner_pb2.JobState.Name(earlier.state)} and its checkpoint "
                                 "still changes; stop it (StopJob) or wait until it ends")
    differences = space_differences(earlier.config, config, primitives, vector_labels)
    if differences:
        raise FailedPrecondition(f"{where}: its policy cannot start this training, whose action or observation space "
                                 f"is another: {'; '.join(differences)}. Keep the job's spaces, or leave "
                                 "init_from_job empty to train a fresh network")
    try:
        checkpoint = latest_checkpoint(earlier.job_dir)
    except FailedPrecondition:
        raise FailedPrecondition(f"{where}: the job saved no checkpoint (it ended before its first save); leave "
                                 "init_from_job empty to train a fresh network") from None
    check_fits(earlier.job_dir, checkpoint, torch.load(checkpoint, map_location="cpu", weights_only=False)["model"],
               vector, actions)
    return checkpoint


def write_start_checkpoint(checkpoint: Path, job_dir: Path) -> Path:
    """Writes into ``job_dir``'s Sample Factory experiment the checkpoint its training starts from: ``checkpoint``'s
    model and optimizer, the counters at 0, no learning rate (the new config's applies)."""
    import torch

    earlier = torch.load(checkpoint, map_location="cpu", weights_only=False)
    target = job_dir / "sf" / job_dir.name / "checkpoint_p0" / START_CHECKPOINT
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": earlier["model"], "optimizer": earlier["optimizer"], "train_step": 0, "env_steps": 0},
               target)
    log.info("job %s starts from %s", job_dir.name, checkpoint)
    return target
