"""A training job watches itself: when its env server is lost or no learner watches it any more, it saves a
checkpoint and exits with the reason in its final progress record, instead of idling until someone deletes it.

- *Env server lost*: a rollout worker whose session failed for good wrote ``error.json`` (``sf_env``).
- *Learner gone*: a local job knows its learner's pid; a Kubernetes Job knows the heartbeat file the learner
  touches in the job's directory while it watches the job (``LEARNER_HEARTBEAT``; the learner and its Jobs share
  the run dir's volume). A heartbeat older than the job's ``learner_timeout`` means no learner watches.

The runner is stopped on its own event loop (Sample Factory's stop saves the policy). If it has not exited
``stop_grace`` seconds later (a dead rollout worker can keep Sample Factory waiting), the process exits anyway;
the learner kills it after twice that.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
LEARNER_HEARTBEAT = "learner_heartbeat"
"""File in a job's directory whose modification time is the learner's last look at the job."""
DEFAULT_LEARNER_TIMEOUT = 600.0
"""Seconds without a heartbeat after which a job takes its learner for gone (when config.json sets none)."""
DEFAULT_STOP_GRACE = 20.0
"""Seconds a job that stops itself gets to exit before it exits anyway (when config.json sets none)."""
ENV_SERVER_LOST = "env_server_lost"
LEARNER_GONE = "learner_gone"
REASONS = (ENV_SERVER_LOST, LEARNER_GONE)
"""The reasons a job stops itself (its final progress record's ``reason``)."""


def touch_heartbeat(job_dir: Path) -> None:
    """The learner's mark that it still watches the job."""
    (job_dir / LEARNER_HEARTBEAT).touch()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    return True


class JobWatch:
    """Says why the job should stop itself (``check``), or None while all is well."""

    def __init__(self, job_dir: Path, *, learner_pid: int | None = None,
                 learner_timeout: float = DEFAULT_LEARNER_TIMEOUT, stop_grace: float = DEFAULT_STOP_GRACE,
                 alive: Callable[[int], bool] = pid_alive):
        self.job_dir = job_dir
        self.stop_grace = stop_grace
        self.learner_pid = learner_pid
        self.learner_timeout = learner_timeout
        self._alive = alive
        self.message = ""

    @classmethod
    def for_job(cls, job_dir: Path, doc: dict[str, Any], learner_pid: int | None) -> JobWatch:
        return cls(job_dir, learner_pid=learner_pid,
                   learner_timeout=float(doc.get("learner_timeout", DEFAULT_LEARNER_TIMEOUT)),
                   stop_grace=float(doc.get("stop_grace", DEFAULT_STOP_GRACE)))

    def check(self) -> str | None:
        if (self.job_dir / "error.json").exists():
            self.message = "the env server was lost (error.json)"
            return ENV_SERVER_LOST
        if self.learner_pid is not None and not self._alive(self.learner_pid):
            self.message = f"the learner (pid {self.learner_pid}) is gone"
            return LEARNER_GONE
        heartbeat = self.job_dir / LEARNER_HEARTBEAT
        if self.learner_pid is None and heartbeat.exists():
            age = time.time() - heartbeat.stat().st_mtime
            if age > self.learner_timeout:
                self.message = (f"no learner has watched this job for {age:.0f} s (its heartbeat is older than "
                                f"learner_timeout={self.learner_timeout:.0f} s)")
                return LEARNER_GONE
        return None


def exit_later(seconds: float, code: int, before_exit: Callable[[], None]) -> None:
    """Ends the process ``seconds`` from now unless it has ended by then (a daemon thread), with every process
    it started (Sample Factory's workers would otherwise go on as orphans)."""

    def wait_then_exit() -> None:
        time.sleep(seconds)
        log.error("the training did not stop within %.0f s of being asked; exiting", seconds)
        try:
            before_exit()
        finally:
            end_children()
            os._exit(code)

    threading.Thread(target=wait_then_exit, daemon=True, name="exit-later").start()


def end_children() -> None:
    """Kills every process this one started, their own children included."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
