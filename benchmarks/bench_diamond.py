"""collect_diamond with a kept plan: ``make bench-diamond`` runs ``python -m benchmarks.bench_diamond``.

An RL-GPT run's plan for collect_diamond (by default a capable model's recorded relay run, docs/runs/
claude-relay-collect_diamond) is scored alone, as the all-code chain, on held-out worlds; then Sample Factory APPO
trains around it for 1M frames (``--frames`` for less): the plan is one macro action next to the primitives
(``RLConfig.plan``), so the policy learns when to step in (fight, flee, eat, drink, sleep) while the plan keeps
its order. The policy is scored on the same worlds. Resumable, with live progress; the results go to
docs/bench-raw/diamond/results.json and the section and plot are rebuilt from them (``--report-only``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from benchmarks.cli_common import LogLevel, ReportOnly, checked_tag, progress_bar, rebuild_section
from benchmarks.common import load_results, machine_info, raw_path, save_results, setup_logging, utc_now
from benchmarks.crafter.diamond import PLAN_RUN, REWARD, K, hands_back, load_plan, run_diamond
from benchmarks.crafter.diamond import agent_prompt as diamond_agent_prompt
from benchmarks.crafter.diamond_plot import plot_diamond
from benchmarks.crafter.diamond_report import render_section, section_title
from rlgpt.v1 import common_pb2

log = logging.getLogger("benchmarks.crafter")
console = Console(stderr=True)
FIGURE = Path("docs/figures/diamond_kept_plan.png")


def main(
    plan_run: Annotated[Path, typer.Option(help="A recorded RL-GPT run whose last plan (every sub-task coded) is "
                                                "kept.")] = PLAN_RUN,
    frames: Annotated[int, typer.Option(help="Env frames APPO trains around the plan.", min=1000)] = 1_000_000,
    seed: Annotated[int, typer.Option(help="Seed of the training worlds (the held-out ones are offset).")] = 0,
    episodes: Annotated[int, typer.Option(help="Held-out worlds each controller is scored on (each controller "
                                               "plays them in one env-server session).", min=1,
                                          max=1024)] = 64,
    k: Annotated[int, typer.Option(help="Frames of one plan action (how often the policy may step in).",
                                   min=1, max=1000)] = K,
    death: Annotated[float, typer.Option(help="Reward of dying (the death term's weight).")] = dict(REWARD)["death"],
    health: Annotated[float, typer.Option(help="Weight of the health term (per point of health lost or regained)."
                                          )] = dict(REWARD)["health"],
    timeout: Annotated[float, typer.Option(help="Seconds the training may take in this invocation; it stops with "
                                                "a checkpoint and the next invocation resumes it.")] = 6 * 3600,
    work: Annotated[Path, typer.Option(help="Where the job lives (kept: running again resumes).")] = Path(
        "runs/bench-diamond"),
    output: Annotated[Path, typer.Option(help="Markdown file whose section is replaced.")] = Path("docs/BENCHMARKS.md"),
    figure: Annotated[Path, typer.Option(help="The plot (PNG).")] = FIGURE,
    raw_json: Annotated[Path | None, typer.Option(help="Raw results; default docs/bench-raw/diamond/results.json."
                                                  )] = None,
    agent_prompt: Annotated[Path | None, typer.Option(help="Write the planner's prompt to the fast agent for RL "
                                                           "around this plan (the chain alone played on briefing "
                                                           "worlds says how it fails) to this file, and stop.")] = None,
    agent_answer: Annotated[Path | None, typer.Option(help="A model's answer to that prompt (JSON): train around "
                                                           "the plan with its config as the second variant; the "
                                                           "first stays as saved.")] = None,
    agent_llm: Annotated[str, typer.Option(help="Who wrote --agent-answer (for the section).")] = "unknown",
    plan_prior: Annotated[float, typer.Option(help="Train the bench's config with the policy starting on the plan "
                                                   "action with this probability (RLConfig.plan_prior): a bench of "
                                                   "its own (its raw results, figure and section); 0: none.",
                                              min=0.0, max=0.99)] = 0.0,
    interrupt_damage: Annotated[bool, typer.Option(help="A plan action hands control back when the player is hurt "
                                                        "(RLConfig.plan_interrupt.damage): a bench of its own with "
                                                        "--threat-within.")] = False,
    threat_within: Annotated[int, typer.Option(help="A plan action hands control back while a threat (Describe's "
                                                    "threats) is this many cells away or closer; 0: off.",
                                               min=0, max=8)] = 0,
    tag: Annotated[str, typer.Option(help="A name for a run of its own (lowercase letters, digits, '-'): its raw "
                                          "results, figure and section are kept apart from the untagged run of "
                                          "the same kind (e.g. a re-run on more worlds after a change).")] = "",
    epochs: Annotated[int, typer.Option(help="Passes over each batch of experience (RLConfig.num_epochs; 0: the "
                                             "learner's default, 4 around a plan).", min=0, max=16)] = 0,
    minibatches: Annotated[int, typer.Option(help="Minibatches per pass, one gradient step each "
                                                  "(RLConfig.num_minibatches; 0: the learner's default, 4 of a "
                                                  "2 x 8 batch around a plan).",
                                             min=0, max=16)] = 0,
    report_only: ReportOnly = False,
    log_level: LogLevel = "INFO",
) -> None:
    """collect_diamond: an RL-GPT run's all-code chain alone vs APPO trained around it as a kept plan."""
    setup_logging(console, log_level)
    interrupt = common_pb2.PlanInterrupt(damage=interrupt_damage, threat_within=threat_within)
    if agent_answer is not None and (interrupt_damage or threat_within or plan_prior):
        raise typer.BadParameter("the fast agent's answer chooses its own interrupts, and the planner its plan prior: "
                                 "give --agent-answer without --interrupt-damage, --threat-within or --plan-prior",
                                 param_hint="--agent-answer")
    answer = json.loads(agent_answer.read_text()) if agent_answer is not None else None  # its kind names the file
    kind = ("interrupt" if interrupt_damage or threat_within or (answer and hands_back(answer))
            else "prior" if plan_prior else "")
    name = "-".join(part for part in ("diamond", kind, checked_tag(tag)) if part)
    raw_json = raw_json or raw_path(name)
    if name != "diamond" and figure == FIGURE:
        figure = figure.with_name(f"{name.replace('diamond', 'diamond_kept_plan', 1).replace('-', '_')}.png")
    if not report_only:
        try:
            plan = load_plan(plan_run)
        except (OSError, ValueError, KeyError) as exc:
            raise typer.BadParameter(f"{plan_run}: not a recorded run with a coded plan ({exc})",
                                     param_hint="--plan-run") from None
        if agent_prompt is not None:
            agent_prompt.write_text(diamond_agent_prompt(plan, work.resolve(), frames, seed, episodes))
            log.info("wrote the fast agent's prompt to %s", agent_prompt)
            return
        progress = progress_bar(console, "frames")
        results = load_results(raw_json) if raw_json.exists() else {}
        results["tag"] = tag
        run = {"date_utc": utc_now(), "machine": machine_info(("torch", "sample-factory", "crafter"))}
        with progress:
            weights = {**dict(REWARD), "death": death, "health": health}
            run["run"] = run_diamond(plan, work.resolve(), frames, seed, timeout, progress, episodes, k,
                                     tuple(weights.items()), answer=answer, plan_prior=plan_prior,
                                     interrupt=interrupt, tag=tag, updates=(epochs, minibatches))
        if answer is not None:
            results["agent"] = {**run, "llm": agent_llm, "answer": str(agent_answer)}
        else:
            results.update(run)
        save_results(raw_json, results)
    rebuild_section(output, raw_json, figure, plot_diamond, section_title, render_section)


if __name__ == "__main__":
    typer.run(main)
