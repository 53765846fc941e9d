"""One bench-learner run: raw stepping in 1 and N processes, then APPO training with the env in-process and via
the env server, each window guarded against other processes' load; returned as plain data (the raw JSON)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks.common import fmt_rate, machine_info, utc_now
from benchmarks.learner import VARIANTS
from benchmarks.learner.measure import (
    ENVS_PER_WORKER,
    EPISODE_LENGTH,
    NUM_WORKERS,
    measure_raw,
    rl_config,
    run_training,
)
from benchmarks.learner.monitor import Guard

log = logging.getLogger("benchmarks.learner")
console = Console(stderr=True)


def run_benchmark(frames: int, raw_seconds: float, seed: int, timeout: float, guard: Guard, work_dir: Path,
                  raw_dir: Path, envs_per_worker: int = ENVS_PER_WORKER) -> dict[str, Any]:
    machine = machine_info(("grpcio", "crafter", "torch", "sample-factory"))
    results: dict[str, Any] = {
        "date_utc": utc_now(), "machine": machine,
        "settings": {"task": "collect_wood", "actions": "primitives only (frames == decisions)",
                     "num_workers": NUM_WORKERS, "envs_per_worker": envs_per_worker, "frames_budget": frames,
                     "raw_seconds": raw_seconds, "seed": seed, "episode_length": EPISODE_LENGTH,
                     "max_others_cpu": guard.max_others, "redo": guard.redo},
    }
    from services.learner.train import sf_argv

    argv = sf_argv(rl_config(frames, seed, envs_per_worker), work_dir / "job", "cpu")
    results["settings"]["sf_argv"] = argv
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/"
                        "{task.total:,.0f}"), TimeElapsedColumn(), console=console, transient=True)
    with progress:
        results["raw_1"] = guard.measure("raw stepping, 1 process", lambda: measure_raw(
            1, envs_per_worker, seed, raw_seconds, progress))
        log.info("raw stepping, 1 process: %.0f frames/s", results["raw_1"]["frames_per_s"])
        results["raw_2"] = guard.measure("raw stepping, 2 processes", lambda: measure_raw(
            NUM_WORKERS, envs_per_worker, seed, raw_seconds, progress))
        log.info("raw stepping, 2 processes: %.0f frames/s", results["raw_2"]["frames_per_s"])
        for variant in VARIANTS:
            results[variant] = guard.measure(f"training, {variant}", lambda v=variant: run_training(
                v, work_dir, frames, seed, timeout, progress, raw_dir, envs_per_worker))
            log.info("training, %s: %s frames/s (second half), rc=%s", variant,
                     fmt_rate(results[variant].get("fps_second_half")), results[variant].get("rc"))
    results["machine"]["load_average_end"] = list(os.getloadavg())
    return results

