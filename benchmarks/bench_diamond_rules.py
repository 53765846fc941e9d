"""Fixed rules around the kept plan: ``make bench-diamond-rules`` runs ``python -m benchmarks.bench_diamond_rules``.

The recorded collect_diamond plan (docs/runs/claude-relay-collect_diamond) with the fast agent's macro actions
(its answer for RL around the plan with interrupts), used by fixed rules instead of a trained policy, on the
held-out worlds bench-diamond scores on: whether those actions could beat the chain alone at all. The results
go to docs/bench-raw/diamond-rules/results.json; the section and plot are rebuilt from them (``--report-only``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from benchmarks.cli_common import LogLevel, ReportOnly, checked_tag, progress_bar, rebuild_section
from benchmarks.common import load_results, machine_info, raw_path, save_results, setup_logging, utc_now
from benchmarks.crafter.diamond import PLAN_RUN, load_plan
from benchmarks.crafter.diamond_revision import revision_prompt as diamond_revision_prompt
from benchmarks.crafter.diamond_rules import ANSWER, RULES, load_answer, run_rules
from benchmarks.crafter.diamond_rules_report import FIGURE, plot_rules, render_section, section_title
from rlgpt import worlds

log = logging.getLogger("benchmarks.crafter")
console = Console(stderr=True)
TRAINED = Path("docs/bench-raw/diamond-interrupt-threat-seen/results.json")
"""bench-diamond's run that trained the default --answer (its 'agent' entry)."""
BRIEFING_EPISODES = 64
"""Briefing worlds the revision prompt's chain alone and rules play (the first prompt's were 64 too)."""


def main(
    plan_run: Annotated[Path, typer.Option(help="A recorded RL-GPT run whose last plan (every sub-task coded) is "
                                                "kept.")] = PLAN_RUN,
    answer: Annotated[Path, typer.Option(help="The fast agent's answer whose macro actions the rules use.")] = ANSWER,
    answer_llm: Annotated[str, typer.Option(help="Who wrote --answer (for the section).")] = (
        "Claude (Anthropic), as a helper agent given only the rendered prompt"),
    rules: Annotated[list[str] | None, typer.Option("--rule", help=f"A rule to play (repeat); default all: "
                                                                   f"{', '.join(RULES)}.")] = None,
    episodes: Annotated[int, typer.Option(help="Held-out worlds each rule plays.", min=1, max=256)] = 256,
    seed: Annotated[int, typer.Option(help="Seed of bench-diamond's training worlds (the held-out ones are "
                                           "offset from it).")] = 0,
    work: Annotated[Path, typer.Option(help="Where the env servers' logs go.")] = Path("runs/bench-diamond-rules"),
    output: Annotated[Path, typer.Option(help="Markdown file whose section is replaced.")] = Path("docs/BENCHMARKS.md"),
    figure: Annotated[Path, typer.Option(help="The plot (PNG).")] = FIGURE,
    raw_json: Annotated[Path | None, typer.Option(help="Raw results; default docs/bench-raw/diamond-rules/"
                                                       "results.json.")] = None,
    tag: Annotated[str, typer.Option(help="A name for a run of its own (lowercase letters, digits, '-'), e.g. "
                                          "another answer's macro actions: its raw results, figure and section "
                                          "are kept apart from the untagged run.")] = "",
    revision_prompt: Annotated[Path | None, typer.Option(help="Write the fast agent's revision prompt for --answer "
                                                              "to this file and stop: the planner's prompt with "
                                                              "that answer, its training's curve (--trained) and "
                                                              "the rules played with its macro actions on the "
                                                              "briefing worlds (never the held-out ones).")] = None,
    trained: Annotated[Path, typer.Option(help="bench-diamond's raw results of a training with --answer (their "
                                               "'agent' entry), for --revision-prompt.")] = TRAINED,
    report_only: ReportOnly = False,
    log_level: LogLevel = "INFO",
) -> None:
    """collect_diamond: the fast agent's macro actions around the kept plan, used by fixed rules."""
    setup_logging(console, log_level)
    chosen = ["chain", *[r for r in (rules or list(RULES)) if r != "chain"]]  # every rule is held to the chain
    if unknown := [r for r in chosen if r not in RULES]:
        raise typer.BadParameter(f"unknown rule {unknown[0][:40]!r}; use one of {', '.join(RULES)}",
                                 param_hint="--rule")
    name = "-".join(part for part in ("diamond-rules", checked_tag(tag)) if part)
    raw_json = raw_json or raw_path(name)
    if tag and figure == FIGURE:
        figure = figure.with_name(f"{name.replace('-', '_')}.png")
    if not report_only:
        try:
            plan = load_plan(plan_run)
            macros = load_answer(answer)
            training = load_results(trained)["agent"]["run"] if revision_prompt is not None else {}
        except (OSError, ValueError, KeyError) as exc:
            raise typer.BadParameter(f"{plan_run}, {answer} or {trained}: unreadable ({exc})",
                                     param_hint="--plan-run") from None
        progress = progress_bar(console, "rules")
        with progress:
            if revision_prompt is not None:
                prompt, _ = diamond_revision_prompt(plan, macros, training, work.resolve(), training["budget"], seed,
                                                    BRIEFING_EPISODES, progress)
                revision_prompt.write_text(prompt)
                log.info("wrote the fast agent's revision prompt to %s", revision_prompt)
                return
            run = run_rules(plan, macros, work.resolve(), chosen, episodes, worlds.held_out_worlds(seed), progress)
        save_results(raw_json, {"date_utc": utc_now(), "machine": machine_info(("crafter",)), "run": run,
                                "answer": str(answer), "answer_llm": answer_llm, "tag": tag})
    rebuild_section(output, raw_json, figure, plot_rules, section_title, render_section)


if __name__ == "__main__":
    typer.run(main)
