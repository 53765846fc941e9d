"""``python -m benchmarks.bench_game``: score a finished run's final controller on a declared held-out set of the
whole game, or (``--report-only``) rewrite the Crafter section and its plot from the committed raw files."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from benchmarks.cli_common import LogLevel, ReportOnly
from benchmarks.common import load_results, raw_path, setup_logging, write_section
from benchmarks.crafter.report import SECTION_TITLE, crafter_section, plot_achievements
from benchmarks.crafter.run import start_env_servers
from benchmarks.game import raw
from benchmarks.game.controller import read_controller
from benchmarks.game.scoring import score
from benchmarks.game.sets import SetRefused, check_new_set, run_world_ranges
from rlgpt import worlds
from rlgpt.v1 import learner_pb2
from services.planner.state import RunState

log = logging.getLogger("benchmarks.game")
console = Console(stderr=True)
CRAFTER_RAW = raw_path("crafter")


def write_report(output: Path, figure: Path, crafter_raw: Path, raw_root: Path) -> None:
    """The Crafter section of ``output`` and its plot from the raw files alone: bench-crafter's (when on disk) and
    every bench-game file under ``raw_root``."""
    appo = load_results(crafter_raw) if crafter_raw.exists() else None
    games = raw.load_all(raw_root)
    plot = plot_achievements(appo, games, figure)
    link = str(plot.resolve().relative_to(output.resolve().parent)) if plot else None
    write_section(output, SECTION_TITLE, crafter_section(appo, games, link))
    log.info("wrote the Crafter section of %s%s from %s and %s", output, f" and {plot}" if plot else "", raw_root,
             crafter_raw)


def main(
    run: Annotated[Path | None, typer.Option(help="A finished RL-GPT run's directory (state.json, request.json).")
                   ] = None,
    episodes: Annotated[int, typer.Option(help="Held-out worlds of the set, one episode each (the issue asks 256+).",
                                          min=1, max=1024)] = 256,
    set_index: Annotated[int, typer.Option("--set", help="The held-out set to declare and score (each set of a run "
                                                         "is scored once; a new scoring declares the next).",
                                           min=0)] = 0,
    name: Annotated[str, typer.Option(help="The raw folder's name (docs/bench-raw/game/NAME); default: the run "
                                           "folder's name.")] = "",
    jobs: Annotated[Path, typer.Option(help="The learner's job folder, holding the run's policies (a chain with "
                                            "policies, a trained policy).")] = Path("runs/learner/jobs"),
    raw_root: Annotated[Path, typer.Option(help="Where bench-game's raw files are.")] = raw.ROOT,
    crafter_raw: Annotated[Path, typer.Option(help="bench-crafter's raw results (the section's APPO rows).")
                           ] = CRAFTER_RAW,
    output: Annotated[Path, typer.Option(help="Markdown file whose Crafter section is replaced.")] = Path(
        "docs/BENCHMARKS.md"),
    figure: Annotated[Path, typer.Option(help="The achievements plot (PNG).")] = Path(
        "docs/figures/crafter_achievements.png"),
    work: Annotated[Path, typer.Option(help="Where the env server's log goes.")] = Path("runs/bench-game"),
    report_only: ReportOnly = False,
    log_level: LogLevel = "INFO",
) -> None:
    """A finished RL-GPT run's final controller on the whole game of Crafter, once per declared held-out set."""
    setup_logging(console, log_level)

    def report() -> None:
        write_report(output, figure, crafter_raw, raw_root)

    if report_only:
        report()
        return
    if run is None:
        raise typer.BadParameter("give the run to score (or --report-only)", param_hint="--run")
    try:
        controller = read_controller(run, jobs)
        used = run_world_ranges(controller.seed, RunState.load(run), jobs)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--run") from None
    first = worlds.game_bench_worlds(controller.seed, set_index)
    log.info("%s: %s (%s); set %d: worlds %s..%s", run, controller.kind, controller.recorded, set_index,
             f"{first:,}", f"{first + episodes - 1:,}")
    try:
        check_new_set(raw_root, controller.run_id, controller.seed, set_index, episodes, used)  # before a server
        servers, _ = start_env_servers(1, work / "logs", {}, learner_pb2.RLConfig(backend="crafter"),
                                       session_envs=episodes)
        try:
            score(controller, servers[0].target, raw_root, name or run.resolve().name, set_index, episodes, used,
                  on_change=report)
        finally:
            servers[0].stop()
    except SetRefused as exc:
        console.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(1) from None
