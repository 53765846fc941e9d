"""``python -m benchmarks.bench_learner``: measure (or, with --report-only, reuse the saved results) and write the
learner section of BENCHMARKS.md."""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks.cli_common import LogLevel
from benchmarks.common import measured_or_saved, raw_path, setup_logging, write_section
from benchmarks.learner.measure import ENVS_PER_WORKER
from benchmarks.learner.monitor import Guard
from benchmarks.learner.report import SECTION_TITLE, print_summary, render_section
from benchmarks.learner.run import console, run_benchmark

log = logging.getLogger("benchmarks.learner")
# A tiny run: short raw windows, the smallest training budget, no waiting for a quiet machine, no redos.
QUICK = {"frames": 1000, "raw_seconds": 2.0, "timeout": 240.0, "redo": 0, "quiet_timeout": 1.0}


def main(
    output: Annotated[Path, typer.Option(help="Markdown file whose learner section is replaced.")] = Path(
        "docs/BENCHMARKS.md"),
    raw_json: Annotated[Path | None, typer.Option(help="Raw results (JSON); default "
                                                       "docs/bench-raw/learner/results.json, or quick.json with "
                                                       "--quick.")] = None,
    report_only: Annotated[bool, typer.Option(help="Rebuild the section from the saved raw results; measure "
                                                   "nothing.")] = False,
    quick: Annotated[bool, typer.Option(help=f"A tiny run to smoke-test the benchmark: {QUICK}.")] = False,
    frames: Annotated[int, typer.Option(help="Env-frame budget of each training run.", min=1000)] = 30000,
    envs_per_worker: Annotated[int, typer.Option(help="Envs per rollout worker (and per raw-stepping process); "
                                                      "default: the learner's own default.", min=1, max=64)
                               ] = ENVS_PER_WORKER,
    raw_seconds: Annotated[float, typer.Option(help="Seconds of each raw-stepping window.", min=1)] = 15.0,
    seed: Annotated[int, typer.Option(help="Base seed of worlds and actions.")] = 0,
    timeout: Annotated[float, typer.Option(help="Seconds a training run may take before it is killed.")] = 600.0,
    max_others: Annotated[float, typer.Option(help="Redo a window when other processes used more than this "
                                                   "(cores).")] = 0.15,
    redo: Annotated[int, typer.Option(help="Redos of a disturbed window.", min=0)] = 2,
    max_load: Annotated[float, typer.Option(help="1-min load average to wait for (briefly) before a "
                                                 "window.")] = 1.0,
    quiet_timeout: Annotated[float, typer.Option(help="Longest wait for a quiet machine before a window "
                                                      "(s).")] = 900.0,
    work_dir: Annotated[Path | None, typer.Option(help="Where jobs run (default: a temporary directory, "
                                                       "removed at the end).")] = None,
    log_level: LogLevel = "INFO",
) -> None:
    """Measure APPO training FPS on Crafter (env in-process and via the env server) against raw stepping."""
    setup_logging(console, log_level)
    raw_json = raw_json or raw_path("learner", "quick.json" if quick else "results.json")
    if quick:
        frames, raw_seconds, timeout = int(QUICK["frames"]), QUICK["raw_seconds"], QUICK["timeout"]
        redo, quiet_timeout = int(QUICK["redo"]), QUICK["quiet_timeout"]
    guard = Guard(max_others=max_others, redo=redo, max_load=max_load, quiet_timeout=quiet_timeout)

    def measure() -> dict[str, Any]:
        work = Path(tempfile.mkdtemp(prefix="bench-learner-")) if work_dir is None else work_dir.resolve()
        work.mkdir(parents=True, exist_ok=True)
        try:
            return run_benchmark(frames, raw_seconds, seed, timeout, guard, work, raw_json.parent, envs_per_worker)
        finally:
            if work_dir is None:
                shutil.rmtree(work, ignore_errors=True)

    results = measured_or_saved(raw_json, report_only, measure)
    write_section(output, SECTION_TITLE, render_section(results))
    print_summary(results)
    log.info("wrote %s from %s", output, raw_json)
