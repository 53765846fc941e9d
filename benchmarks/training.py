"""How a benchmark trains a job: through the learner's own launcher (``services.learner.jobs``: the job directory
readied for a first launch or a resume, the command line, the environment, the job's watch on whoever launched it),
followed with a progress bar under a wall-clock limit, and stopped with a checkpoint to resume from."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlgpt.v1 import learner_pb2
from services.learner.jobs import TRAIN_MODULE, LocalHandle, LocalRunner, read_progress, wait_for_exit

BENCH_ENV = {"PYTHONUNBUFFERED": "1"}
"""Added to a benchmark's training process: its log is read while it runs and after it is killed."""


def launch_training(job_dir: Path, config: learner_pb2.RLConfig, module: str = TRAIN_MODULE) -> LocalHandle:
    """Starts the training of the job in ``job_dir`` (readied by ``jobs.prepare_job_dir``) as the learner starts a
    local job: its own process group, its output in ``train.log``, ending itself if this process dies. ``module``:
    the training entry point (``jobs.train_command``)."""
    return LocalRunner(module, env=BENCH_ENV).launch(job_dir.name, job_dir, config)


def follow_training(handle: LocalHandle, job_dir: Path, timeout: float, show: Callable[[dict[str, Any]], None],
                    interval: float) -> int | None:
    """Waits until the training exits or ``timeout`` seconds have passed, calling ``show`` with its latest progress
    record every ``interval`` seconds; its exit code, None while it still runs."""
    start = time.perf_counter()
    while handle.poll() is None and time.perf_counter() - start < timeout:
        records = read_progress(job_dir)
        if records:
            show(records[-1])
        time.sleep(interval)
    return handle.poll()


def stop_training(handle: LocalHandle, job_dir: Path, grace: float) -> None:
    """Asks the training to stop (its ``stop`` file: it saves a checkpoint and exits), kills its process group if it
    still runs ``grace`` seconds later, and takes the request back so that the job can be resumed."""
    (job_dir / "stop").touch()
    if wait_for_exit(handle, grace) is None:
        handle.kill()
    (job_dir / "stop").unlink(missing_ok=True)
