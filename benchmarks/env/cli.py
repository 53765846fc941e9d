"""``python -m benchmarks.bench_env``: measure (or, with --report-only, reuse the saved results) and write the
env-server section of BENCHMARKS.md."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks.cli_common import LogLevel
from benchmarks.common import measured_or_saved, raw_path, setup_logging, write_section
from benchmarks.env.report import SECTION_TITLE, print_summary, render_section
from benchmarks.env.run import console, run_benchmark

log = logging.getLogger("benchmarks.env")
QUICK = {"envs": "1,4", "seconds": 0.5, "rounds": 2, "profile_envs": 4, "profile_seconds": 2}


def parse_counts(text: str) -> list[int]:
    counts = sorted({int(part) for part in text.split(",") if part.strip()})
    if not counts or counts[0] < 1:
        raise typer.BadParameter("env counts must be positive integers, e.g. 1,16,64")
    return counts


def main(
    output: Annotated[Path, typer.Option(help="Markdown file whose env-server section is replaced.")] = Path(
        "docs/BENCHMARKS.md"),
    raw_json: Annotated[Path | None, typer.Option(help="Raw results (JSON); default docs/bench-raw/env/results.json, "
                                                       "or quick.json with --quick.")] = None,
    report_only: Annotated[bool, typer.Option(help="Rebuild the section from the saved raw results; measure "
                                                   "nothing.")] = False,
    quick: Annotated[bool, typer.Option(help=f"A tiny run to smoke-test the benchmark: {QUICK}.")] = False,
    envs: Annotated[str, typer.Option(help="Comma-separated env counts per session.")] = "1,16,64",
    seconds: Annotated[float, typer.Option(help="Target seconds per timed measurement.", min=0.1)] = 6.0,
    rounds: Annotated[int, typer.Option(help="Slices each measurement is cut into, interleaved across paths.",
                                        min=1)] = 8,
    seed: Annotated[int, typer.Option(help="Base seed of worlds and actions.")] = 0,
    profile_envs: Annotated[int, typer.Option(help="Env count of the profiled run; 0 skips profiling.")] = 16,
    profile_seconds: Annotated[int, typer.Option(help="Seconds of profiling.", min=1)] = 8,
    profiler: Annotated[str, typer.Option(help="'auto': py-spy when installed, else cProfile; 'cprofile'.")] = "auto",
    log_level: LogLevel = "INFO",
) -> None:
    """Measure Crafter frames/s in-process and through the env server; write docs/BENCHMARKS.md."""
    setup_logging(console, log_level)
    raw_json = raw_json or raw_path("env", "quick.json" if quick else "results.json")
    if profiler not in ("auto", "cprofile"):
        raise typer.BadParameter("--profiler must be 'auto' or 'cprofile'")
    if quick:
        envs, seconds, rounds = QUICK["envs"], QUICK["seconds"], QUICK["rounds"]
        profile_envs, profile_seconds = QUICK["profile_envs"], QUICK["profile_seconds"]

    def measure() -> dict[str, Any]:
        # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the finally blocks stop the server.
        signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
        return run_benchmark(parse_counts(envs), seconds, rounds, seed, profile_envs, profile_seconds, profiler,
                             raw_json.parent)

    results = measured_or_saved(raw_json, report_only, measure)
    write_section(output, SECTION_TITLE, render_section(results))
    print_summary(results)
    log.info("wrote %s from %s", output, raw_json)
