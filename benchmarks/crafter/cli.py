"""``python -m benchmarks.bench_crafter``: train (or resume) the variants, save their results, write the section."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from benchmarks.cli_common import LogLevel, ReportOnly, progress_bar
from benchmarks.common import load_results, machine_info, raw_path, setup_logging, utc_now, write_section
from benchmarks.crafter.report import SECTION_TITLE, crafter_section, plot_achievements, variant_numbers
from benchmarks.crafter.run import (
    ENVS_PER_WORKER,
    EPISODE_LENGTH,
    NUM_WORKERS,
    VARIANTS,
    eval_worlds,
    load_library,
    run_variant,
)
from benchmarks.game import raw as game_raw

log = logging.getLogger("benchmarks.crafter")
console = Console(stderr=True)


def main(
    variants: Annotated[str, typer.Option(help=f"Comma-separated, of: {', '.join(VARIANTS)} (library-skills needs "
                                               "--library).")] = "appo,reference-skills",
    frames: Annotated[int, typer.Option(help="Env-frame budget of each variant (Crafter's benchmark: 1M).",
                                        min=1000)] = 1_000_000,
    seed: Annotated[int, typer.Option(help="Seed of the training worlds.")] = 0,
    timeout: Annotated[float, typer.Option(help="Seconds a variant may train in this invocation; it stops with a "
                                                "checkpoint and the next invocation resumes it.")] = 6 * 3600,
    work: Annotated[Path, typer.Option(help="Where the variants' jobs live (kept: running again resumes).")] = Path(
        "runs/bench-crafter"),
    output: Annotated[Path, typer.Option(help="Markdown file whose Crafter section is replaced.")] = Path(
        "docs/BENCHMARKS.md"),
    figure: Annotated[Path, typer.Option(help="The success-rate plot (PNG).")] = Path(
        "docs/figures/crafter_achievements.png"),
    raw_json: Annotated[Path | None, typer.Option(help="Raw results; default docs/bench-raw/crafter/results.json."
                                                  )] = None,
    library: Annotated[Path | None, typer.Option(help="The skill library an RL-GPT run left (its planner's JSON, "
                                                   "e.g. runs/skill_library.json), for library-skills.")] = None,
    library_llm: Annotated[str, typer.Option(help="The LLM that wrote the library's skills, for the report."
                                             )] = "",
    eval_episodes: Annotated[int, typer.Option(help="After training, episodes of the trained policy on held-out "
                                                    "worlds (seeds no training episode used), one per world; 0: "
                                                    "none.", min=0, max=256)] = 0,
    eval_set: Annotated[int, typer.Option(help="The held-out worlds: bench-game's set K of a run with seed --seed "
                                               "(worlds.game_bench_worlds(seed, K) onward), so that these rows pair "
                                               "world by world with that run's scoring of set K.", min=0)] = 0,
    report_only: ReportOnly = False,
    log_level: LogLevel = "INFO",
) -> None:
    """Crafter's benchmark: APPO on the game's own reward for 1M frames, with and without coded skills."""
    setup_logging(console, log_level)
    raw_json = raw_json or raw_path("crafter")
    chosen = [v.strip() for v in variants.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise typer.BadParameter(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}", param_hint="--variants")
    if "library-skills" in chosen and library is None:
        raise typer.BadParameter("library-skills needs --library", param_hint="--library")
    if eval_episodes:
        try:
            eval_worlds(seed, eval_set, eval_episodes, frames)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--eval-set") from None
    skills = load_library(library) if library is not None else None
    results = load_results(raw_json) if raw_json.exists() else {"variants": {}}
    if not report_only:
        results.update(date_utc=utc_now(), machine=machine_info(("torch", "sample-factory", "crafter")),
                       settings={"episode_length": EPISODE_LENGTH, "num_workers": NUM_WORKERS,
                                 "envs_per_worker": ENVS_PER_WORKER, "seed": seed})
        progress = progress_bar(console, "frames")
        with progress:
            for variant in chosen:
                began = utc_now()
                run = run_variant(variant, work.resolve(), frames, seed, timeout, progress, eval_episodes,
                                  skills if variant == "library-skills" else None, eval_set)
                if variant == "library-skills":
                    run.update(library=str(library), library_llm=library_llm)
                previous = results["variants"].get(variant, {})
                # When its training began; a variant only summarised or evaluated again keeps its date.
                run["date_utc"] = previous.get("date_utc", began) if run.get("rc") == 0 and previous.get(
                    "frames", 0) >= run["budget"] else began
                results["variants"][variant] = run
                game_raw.save(raw_json, results)  # each variant as soon as it is done, an episode a line
                numbers = variant_numbers(run) or {}
                log.info("%s: %s frames, %d episodes, score %.2f", variant, f"{run['frames']:,}",
                         numbers.get("episodes", 0), numbers.get("score", float("nan")))
    appo = results if results["variants"] else None  # None: the section says its rows have no data on disk
    games = game_raw.load_all(game_raw.ROOT)  # the section's RL-GPT rows (make bench-game), kept beside these
    plot = plot_achievements(appo, games, figure)
    link = str(plot.resolve().relative_to(output.resolve().parent)) if plot else None
    write_section(output, SECTION_TITLE, crafter_section(appo, games, link))
    log.info("wrote %s and %s from %s and %s", output, plot, raw_json, game_raw.ROOT)
