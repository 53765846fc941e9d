"""bench-run's section, computed from its raw results alone (docs/results/make-run.json)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from benchmarks.common import joined, machine_line, markdown_table
from rlgpt.stats import rate_text
from services.planner.report_evaluations import TARGETS

FIGURE = Path("docs/figures/make_run.png")
RAW = Path("docs/results/make-run.json")
PACKAGES = ("torch", "sample-factory", "crafter")
"""Package versions the machine line names."""


def section_title(results: dict[str, Any]) -> str:
    return f"## make run on {len(results['runs'])} seeds (make bench-run)"


def final_rate(run: dict[str, Any]) -> float:
    """The run's final success (0 when it was not evaluated: a run that ends without one solved nothing shown)."""
    final = run.get("final") or {}
    return final["count"] / final["episodes"] if final.get("episodes") else 0.0


def median_success(results: dict[str, Any]) -> float:
    return statistics.median(final_rate(run) for run in results["runs"])


def within_limit(run: dict[str, Any], results: dict[str, Any]) -> bool:
    return not run["timed_out"] and run["wall_seconds"] <= 60 * results["criteria"]["minutes"]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def why_stopped(run: dict[str, Any]) -> str:
    """Why the run ended: the planner's stop reason, or what ended the process (the watchdog, an error)."""
    last = (run.get("log_tail") or ["no output"])[-1]
    if run["timed_out"]:
        said = f"; its state says: {run['stop_reason']}" if run.get("stop_reason") else ""
        return f"timed out: the bench stopped it after {run['timeout_seconds'] / 60:.0f} min{said}"
    if not run.get("run_id"):
        return f"no run was started (exit code {run['returncode']}: {last})"
    if run["returncode"] != 0:
        return f"exited with code {run['returncode']}: {run.get('stop_reason') or last}"
    return run.get("stop_reason") or "not recorded (the run's state has no stop reason)"


def evaluation_text(evaluation: dict[str, Any] | None) -> str:
    return rate_text(evaluation["count"], evaluation["episodes"]) if evaluation else "not evaluated"


def _budgets_line(results: dict[str, Any]) -> str:
    run = next((r for r in results["runs"] if r.get("budgets")), None)
    if run is None:
        return "No run wrote its request, so its budgets are unknown."
    b = run["budgets"]
    given = (f" (the planner's defaults but {joined(run['budgets_set'])}, set by the command line)"
             if run.get("budgets_set") else " (the planner's defaults)")
    frames = f"{b['total_env_frames']:,} env frames" if b["total_env_frames"] else "unbounded env frames"
    return (f"Task `{run['task']}`; budgets{given}: target {b['target_success']:.0%} whole-task success, {frames}, "
            f"{b['max_outer_iterations']} outer iterations, {b['eval_episodes']} episodes per whole-task "
            "evaluation.")


def summary_lines(results: dict[str, Any]) -> list[str]:
    """The median against the bar, the time limit, and why runs below their target stopped."""
    runs, criteria = results["runs"], results["criteria"]
    median = median_success(results)
    met = "met" if median >= criteria["median_success"] else "not met"
    lines = [f"**Median final success across the {len(runs)} seeds: {median:.0%}** (the bar: "
             f"{criteria['median_success']:.0%}, {met}). "
             f"{sum(within_limit(r, results) for r in runs)} of {len(runs)} runs took at most "
             f"{criteria['minutes']} minutes."]
    unevaluated = [str(r["seed"]) for r in runs if not r.get("final")]
    if unevaluated:
        one = len(unevaluated) == 1
        lines[-1] += (f" Seed{'' if one else 's'} {joined(unevaluated)} ended without a final evaluation and "
                      f"count{'s' if one else ''} as 0% in the median.")
    for run in runs:
        target = (run.get("budgets") or {}).get("target_success")
        if run.get("final") and target is not None and final_rate(run) < target:
            lines.append(f"Seed {run['seed']}'s final evaluation ({final_rate(run):.0%}, on worlds no decision of the "
                         f"run saw) is below its {target:.0%} target; it stopped after {run['outer_iterations']} outer "
                         f"iteration{'s' * (run['outer_iterations'] != 1)} because {why_stopped(run)}.")
    tokens = [f"seed {r['seed']} {r.get('tokens', 0):,} ({r.get('llm_calls', 0)} calls)" for r in runs]
    lines.append(f"LLM tokens per run: {joined(tokens)}.")
    return lines


def iteration_rows(results: dict[str, Any]) -> list[list[object]]:
    rows = []
    for run in results["runs"]:
        for it in run.get("iterations", []):
            verdict = it.get("verdict") or {}
            sent = TARGETS.get(verdict.get("target", ""), verdict.get("target", "")) if verdict else "none"
            if verdict.get("subtask"):
                sent += f" ({verdict['subtask']})"
            rows.append([run["seed"], it["iteration"], evaluation_text(it["evaluation"]), f"{it['frames']:,}",
                         f"{it['seconds'] / 60:.1f}", f"{it['tokens']:,}", _cell(it.get("kept") or "-"),
                         _cell(sent)])
    return rows


def render_section(results: dict[str, Any], plot: str | None, title: str) -> str:
    runs = results["runs"]
    seeds = joined([str(r["seed"]) for r in runs])
    llms = joined(sorted({r["llm"] for r in runs if r.get("llm")})) or "unknown (no run wrote LLM records)"
    command = results["command"]
    rows = [[r["seed"], r.get("outer_iterations", 0),
             f"{r.get('frames_used', 0):,}", evaluation_text(r.get("final")), f"{r['wall_seconds'] / 60:.1f}",
             "yes" if within_limit(r, results) else "no", _cell(why_stopped(r))] for r in runs]
    lines = [
        title, "",
        machine_line(results["date_utc"], results["machine"], PACKAGES) + f". LLM: {llms}.", "",
        f"What ran: what `make run` runs, `{command}`, once for each of the seeds {seeds}, one after another: "
        f"{len(runs)} seeds of one clone (one checkout and venv), not {len(runs)} fresh clones. Each seed had a "
        "runs directory of its own, empty at its start (no skill library, no learner jobs), and started its own "
        f"services and embedded LLM. {_budgets_line(results)} Wall time is the whole command's, services' start "
        f"included. Raw results, per run and per world: `{results['raw']}`.", "",
        *markdown_table(["seed", "outer iterations", "frames used", "final success (95% CI)", "wall min",
                         f"within {results['criteria']['minutes']} min", "why it stopped"], rows, "rrrrrll"), "",
        *summary_lines(results), "",
        "The whole task after each outer iteration (each run's evaluations play the same worlds; kept: whether "
        "that controller replaced the best so far, paired world by world; the verdict: who the whole task's review "
        "sent the work to):", "",
        *markdown_table(["seed", "iteration", "whole task (95% CI)", "frames", "minutes", "tokens", "kept",
                         "verdict"], iteration_rows(results), "rrrrrrll"),
    ]
    if plot:
        lines += ["", f"![make run, whole-task success per iteration and final]({plot})"]
    return "\n".join(lines) + "\n"
