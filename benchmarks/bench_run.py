"""`make run` on several seeds: ``make bench-run`` runs ``python -m benchmarks.bench_run``.

For each seed (``--seeds``, default 0,1,2) it runs exactly what a user's ``make run`` runs, ``.venv/bin/rlgpt run
--seed S --runs-dir <work>/seedS`` (with ``--extra`` flags, if any), one after another, each in a runs directory
of its own that starts empty (no skill library, no learner jobs: as a fresh clone, though every seed shares this
checkout and venv). A watchdog stops a run past ``--timeout-minutes``. Each run's numbers are read from its own
files (state.json, request.json, llm/), saved per run and per world in the tracked docs/results/make-run.json; the
section of docs/BENCHMARKS.md and its figure are rebuilt from that file alone (``--report-only``).

Started again with the same ``--work``, seeds that finished are read back, not run again.
"""

from __future__ import annotations

import logging
import os
import shlex
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from benchmarks.cli_common import LogLevel, ReportOnly, progress_bar, rebuild_section
from benchmarks.common import machine_info, save_results, setup_logging, utc_now
from benchmarks.run.execute import refused_extra, rlgpt_executable, run_seed, saved_record, shown_path
from benchmarks.run.plot import plot_runs
from benchmarks.run.reading import find_run_dir
from benchmarks.run.report import FIGURE, PACKAGES, RAW, render_section, section_title
from services.planner.settings import PlannerSettings

log = logging.getLogger("benchmarks.run")
console = Console(stderr=True)
WORK_ROOT = Path("runs/bench-run")
CRITERIA = {"median_success": 0.75, "minutes": 15}
"""What issue 35 asks of `make run`: a median final success of at least 75%, each run within 15 minutes (2 cores)."""


def parsed_seeds(seeds: str) -> list[int]:
    try:
        parsed = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise typer.BadParameter(f"{seeds[:40]!r}: give comma-separated integers, e.g. 0,1,2",
                                 param_hint="--seeds") from None
    if not parsed or len(set(parsed)) != len(parsed):
        raise typer.BadParameter(f"{seeds[:40]!r}: give distinct seeds, e.g. 0,1,2", param_hint="--seeds")
    return parsed


def parsed_extra(extra: str) -> list[str]:
    try:
        args = shlex.split(extra)
    except ValueError as exc:
        raise typer.BadParameter(f"{extra[:60]!r}: {exc}", param_hint="--extra") from None
    if refused := refused_extra(args):
        raise typer.BadParameter(f"{refused}: the bench sets --seed and --runs-dir itself and runs `make run`'s "
                                 "command (no --resume, --planner or --replay)", param_hint="--extra")
    return args


def checked_work(work: Path, seeds: list[int]) -> None:
    """Refuses a seed's runs directory that holds a run the bench did not finish (it would not start empty)."""
    for seed in seeds:
        runs_dir = work / f"seed{seed}"
        if saved_record(runs_dir) is None and runs_dir.exists() and find_run_dir(runs_dir) is not None:
            raise typer.BadParameter(f"{runs_dir} holds an unfinished run: remove it, or give another --work",
                                     param_hint="--work")


def run_seeds(seeds: list[int], work: Path, extra: list[str], timeout_minutes: float) -> list[dict[str, Any]]:
    """Each seed's run, one after another, with live progress in frames (of the planner's frame budget)."""
    budget = PlannerSettings.load().total_env_frames or None
    records = []
    with progress_bar(console, "frames") as progress:
        for seed in seeds:
            runs_dir = work / f"seed{seed}"
            task = progress.add_task(f"make run, seed {seed}", total=budget)
            if (record := saved_record(runs_dir)) is not None:
                log.info("seed %d: finished before, read from %s", seed, runs_dir)
            else:
                record = run_seed(seed, runs_dir, extra, 60 * timeout_minutes,
                                  lambda frames, task=task: progress.update(task, completed=frames))
            progress.update(task, completed=record.get("frames_used", 0))
            final = record.get("final") or {}
            log.info("seed %d: %s, final %s, %.1f min: %s", seed, record.get("run_id") or "no run",
                     f"{final['count']}/{final['episodes']}" if final.get("episodes") else "not evaluated",
                     record["wall_seconds"] / 60, record.get("stop_reason") or f"exit code {record['returncode']}")
            records.append(record)
    return records


def main(
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds; one `rlgpt run --seed S` each.")] = "0,1,2",
    work: Annotated[Path | None, typer.Option(help="Where each seed's runs directory goes (<work>/seedS); default "
                                                   "a new folder under runs/bench-run. Seeds finished there are "
                                                   "read back, not run again.")] = None,
    extra: Annotated[str, typer.Option(help="More rlgpt-run flags, passed to every run and recorded (e.g. "
                                            "\"--target 0.9\").")] = "",
    timeout_minutes: Annotated[float, typer.Option(help="A run still going after this many minutes is stopped "
                                                        "and recorded as timed out.", min=1)] = 30,
    output: Annotated[Path, typer.Option(help="Markdown file whose section is replaced.")] = Path("docs/BENCHMARKS.md"),
    raw_json: Annotated[Path, typer.Option(help="Raw results (tracked).")] = RAW,
    figure: Annotated[Path, typer.Option(help="The plot (PNG).")] = FIGURE,
    report_only: ReportOnly = False,
    log_level: LogLevel = "INFO",
) -> None:
    """`make run` once per seed, each from an empty runs directory: iterations, frames, final success, time."""
    setup_logging(console, log_level)
    if not report_only:
        chosen, args = parsed_seeds(seeds), parsed_extra(extra)
        if work is None:
            WORK_ROOT.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=WORK_ROOT))
        checked_work(work, chosen)
        if os.environ.get("RLGPT_PLANNER_LIBRARY_PATH"):
            log.warning("RLGPT_PLANNER_LIBRARY_PATH is set: every seed's run uses that skill library, not an "
                        "empty one of its own")
        results: dict[str, Any] = {
            "date_utc": utc_now(), "machine": machine_info(PACKAGES), "seeds": chosen, "extra": shlex.join(args),
            "command": shlex.join([shown_path(rlgpt_executable()), "run", "--seed", "S", "--runs-dir",
                                   f"{shown_path(work)}/seedS", *args]),
            "timeout_minutes": timeout_minutes, "criteria": CRITERIA, "work": shown_path(work),
            "clones": "one clone, one runs directory per seed",
            "settings_env": sorted(name for name in os.environ if name.startswith("RLGPT_")),
            "raw": str(raw_json)}
        started = time.monotonic()
        results["runs"] = run_seeds(chosen, work, args, timeout_minutes)
        results["total_seconds"] = round(time.monotonic() - started, 1)
        save_results(raw_json, results)
    rebuild_section(output, raw_json, figure, plot_runs, section_title, render_section)


if __name__ == "__main__":
    typer.run(main)
