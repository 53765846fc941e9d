"""A training job's frame budget, counted where the frames are spent: in each rollout worker's vector env.

Each vector env (``vec_env.SessionVecEnv``, one per split of a rollout worker) adds the env frames every step
took (skill frames and the chain prefix's frames of an autoreset included) to its own small file,
``JOB_DIR/frames/worker<W>-<S>``; the sum over those files is the job's real frame count. Before each step a
vector env reads the sum and, once it reached ``RLConfig.env_frames``, stops stepping the env server: it answers
its last observations again, no reward, no frames, nothing ended, until the job stops. The training's observer
(``train.ProgressObserver``) stops the job on the same sum. So a job spends at most its budget plus one decision
per env (:data:`MARGIN_NOTE`): every vector env may have read the sum just below the budget before its last step.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

log = logging.getLogger(__name__)

FRAMES_DIR = "frames"
"""The folder of a job's frame counters, one file per vector env."""
MARGIN_NOTE = "one decision per env: up to skill_max_steps frames, plus a chain prefix's frames if that step reset it"
"""How far past its budget a job may go: the last step of each env, taken while the sum was still below it."""
IDLE_SLEEP = 0.05
"""Seconds a vector env past the budget waits per step: the job is stopping, the worker should not spin."""


def _counters(job_dir: Path) -> list[Path]:
    """A job's frame counter files, one per vector env (not the half-written ``.tmp`` ones)."""
    folder = job_dir / FRAMES_DIR
    return [p for p in folder.glob("worker*") if not p.name.endswith(".tmp")] if folder.is_dir() else []


def spent_frames(job_dir: Path) -> int | None:
    """The frames a job's vector envs spent (the sum of their counters); ``None`` where none counts (an env that
    keeps no counter, e.g. the benchmark's in-process one)."""
    total, found = 0, False
    for path in _counters(job_dir):
        try:
            total += int(path.read_text() or 0)
            found = True
        except (OSError, ValueError):  # written by rename: only a vanished or foreign file lands here
            continue
    return total if found else None


def frames_touched(job_dir: Path) -> float | None:
    """When a job's vector envs last counted frames (the newest counter file's mtime); ``None`` where none counts
    yet. The learner's watchdog reads it as progress: a job whose policy has not updated yet (its first batch of
    slow macro-action decisions) still steps its envs."""
    times = []
    for path in _counters(job_dir):
        try:
            times.append(path.stat().st_mtime)
        except OSError:  # renamed away between the listing and the stat
            continue
    return max(times) if times else None


class FrameMeter:
    """One vector env's counter of frames spent and its check of the job's budget."""

    def __init__(self, job_dir: Path, worker: int, split: int, budget: int):
        self.path = job_dir / FRAMES_DIR / f"worker{worker}-{split}"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.job_dir = job_dir
        self.budget = budget
        self.frames = int(self.path.read_text() or 0) if self.path.exists() else 0  # a resumed job's
        self.exhausted = False

    def add(self, frames: int) -> None:
        """Counts frames this env just spent; written by rename so a reader never meets half a number."""
        if frames <= 0:
            return
        self.frames += int(frames)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(str(self.frames))
        os.replace(tmp, self.path)

    def over(self) -> bool:
        """Whether the job spent its budget (``budget`` 0: no budget); once true, it stays true."""
        if not self.exhausted and self.budget > 0 and (spent_frames(self.job_dir) or 0) >= self.budget:
            self.exhausted = True
            log.info("frame budget %d reached: %s stops stepping its env server", self.budget, self.path.name)
        return self.exhausted

    def idle(self) -> None:
        """Waits a moment instead of a step past the budget: the job is stopping, its worker should not spin."""
        time.sleep(IDLE_SLEEP)
