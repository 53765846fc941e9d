"""bench-rlgpt's section of BENCHMARKS.md and its plots, built only from the saved results.

A run is one dict of ``results["runs"]``: task, mode, agents (the planner's agent setup; absent in results saved
before the agent ablation, "" for runs without agents), seconds, where it was measured (:mod:`.results`), the
library it started from (:mod:`.library`) and :func:`benchmarks.rlgpt.events.run_numbers`'s numbers (``iterations``
absent in results saved before the planner reported success per iteration)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from benchmarks.common import joined, markdown_table
from benchmarks.rlgpt.library import library_cell, library_text
from benchmarks.rlgpt.plots import plot_iterations, plot_modes
from benchmarks.rlgpt.results import measured_cell, measured_text
from benchmarks.rlgpt.runs import ABLATED_MODE, NOT_EVALUATED, fmt_pct, iteration_runs, iterations, label
from rlgpt.stats import paired

TITLE = "## RL-GPT vs pure RL vs pure code (make bench-rlgpt)"
REFERENCE_MODE = "rl+reference-skills"
AGENT_SETUPS = ("one", "slow-fast", "slow-fast-critic")
"""The planner's agent setups (services.planner.context.AgentSetup), in the paper's order of expected success."""
FIGURE = "rlgpt_modes.png"
ITERATIONS_FIGURE = "rlgpt_iterations.png"
NO_ITERATION = "-"


def iteration_trail(run: dict[str, Any]) -> str:
    """'0% -> n/a -> 25%' (empty when no iteration was recorded)."""
    return " -> ".join(NOT_EVALUATED if rate is None else fmt_pct(rate) for rate in iterations(run))


def ranking(task: str, runs: list[dict[str, Any]]) -> str:
    """Which modes reached the highest final success on ``task``, which none, and which trained to a success first."""
    best = max(r["success_rate"] for r in runs)
    leaders = [label(r) for r in runs if r["success_rate"] == best]
    text = (f"On `{task}`, no mode succeeded in the final evaluation" if best == 0 else
            f"On `{task}`, the highest final success was {fmt_pct(best)} ({joined([f'`{m}`' for m in leaders])})")
    zero = [label(r) for r in runs if r["success_rate"] == 0]
    if best > 0 and zero:
        text += f"; {joined([f'`{m}`' for m in zero])} reached 0%"
    trained = [r for r in runs if r["frames_to_first_training_success"] is not None]
    if trained:
        first = min(trained, key=lambda r: r["frames_to_first_training_success"])
        text += (f"; of the modes whose training succeeded at all, `{label(first)}` got there in the fewest training "
                 f"frames ({first['frames_to_first_training_success']:,})")
    return text + "."


def final_worlds(run: dict[str, Any]) -> tuple[int, list[bool]] | None:
    """The run's final evaluation per world: (first world's seed, successes in world order); None in results saved
    before the bench kept them."""
    final = run.get("final") or {}
    return (int(final.get("seed", 0)), list(final["successes"])) if final.get("successes") else None


def overspent(runs: list[dict[str, Any]], budget: int) -> str:
    """The runs whose skill tests and trainings spent more frames than the budget every run had (a bug to fix,
    not a setting: such a run's comparison at equal frames does not hold)."""
    spent_by = {id(r): r.get("training_frames", 0) + r.get("skill_test_frames", 0) for r in runs}
    over = [r for r in runs if spent_by[id(r)] > budget]
    if not over:
        return ""
    spent = [f"`{r['task']}` / `{label(r)}` {spent_by[id(r)]:,}" for r in over]
    return (f"Over the budget of {budget:,} frames (a learner overshoot, not a setting; these runs do not compare at "
            f"equal frames): {joined(spent)}.")


def paired_sentence(task: str, runs: list[dict[str, Any]]) -> str:
    """RL-GPT against each other mode on ``task``, world by world, where both were evaluated on the same worlds
    (the same first world and count); empty where no pair was."""
    ours = [r for r in runs if r["mode"] == ABLATED_MODE and final_worlds(r)]
    parts = []
    for mine in ours:
        seed, wins = final_worlds(mine)  # type: ignore[misc]
        for other in runs:
            theirs = final_worlds(other)
            if other is mine or theirs is None or other["mode"] == ABLATED_MODE or theirs[0] != seed \
                    or len(theirs[1]) != len(wins):
                continue
            pair = paired(wins, theirs[1])
            parts.append(f"`{label(mine)}` vs `{label(other)}` on the same {pair.worlds} worlds (from world {seed}): "
                         f"{pair.only_new} solved only by `{label(mine)}`, {pair.only_old} only by `{label(other)}` "
                         f"(exact McNemar p={pair.p_value:.2g})")
    return f"On `{task}`, paired: " + "; ".join(parts) + "." if parts else ""


# --- the agent ablation -----------------------------------------------------------------------------
def ablation_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of the ablated mode that recorded their agent setup."""
    return [r for r in runs if r["mode"] == ABLATED_MODE and r.get("agents")]


def setups_of(runs: list[dict[str, Any]]) -> list[str]:
    """The agent setups of ``runs``: the known ones in the paper's order, then any other in the runs' order."""
    seen = list(dict.fromkeys(r["agents"] for r in runs))
    return [s for s in AGENT_SETUPS if s in seen] + [s for s in seen if s not in AGENT_SETUPS]


def ablation_cell(run: dict[str, Any] | None) -> str:
    """'25% (0% -> 25%)': the final success and, in parentheses, the success after each outer iteration."""
    if run is None:
        return "-"
    trail = iteration_trail(run)
    cell = fmt_pct(run["success_rate"]) + (f" ({trail})" if trail else "")
    return cell + (", run failed" if run.get("error") else "")


def ablation_table(runs: list[dict[str, Any]]) -> list[str]:
    """Rows: tasks; columns: the agent setups; cells: :func:`ablation_cell`."""
    runs = ablation_runs(runs)
    setups, tasks = setups_of(runs), list(dict.fromkeys(r["task"] for r in runs))
    rows = [(task, *(ablation_cell(next((r for r in runs if r["task"] == task and r["agents"] == s), None))
                     for s in setups)) for task in tasks]
    return markdown_table(("task", *setups), rows, "l" + "r" * len(setups))


def ablation_sentence(task: str, runs: list[dict[str, Any]]) -> str:
    """Which setup reached the highest final success on ``task`` (ties said as ties), from ``runs`` (that task's
    ablation runs)."""
    setups = [f"`{r['agents']}`" for r in runs]
    best = max(r["success_rate"] for r in runs)
    if best == 0:
        return (f"On `{task}`, no setup succeeded: {joined(setups)} "
                f"{'all ' if len(runs) > 2 else 'both ' if len(runs) == 2 else ''}reached 0% final success.")
    leaders = [f"`{r['agents']}`" for r in runs if r["success_rate"] == best]
    others = [f"`{r['agents']}` {fmt_pct(r['success_rate'])}" for r in runs if r["success_rate"] != best]
    if len(leaders) == 1:
        text = f"On `{task}`, {leaders[0]} was best with {fmt_pct(best)} final success"
    else:
        text = f"On `{task}`, {joined(leaders)} tied {'at' if len(leaders) == len(runs) else 'for best at'} " \
               f"{fmt_pct(best)} final success"
    return text + (f" ({', '.join(others)})." if others else ".")


def paper_order_sentence(runs: list[dict[str, Any]]) -> str:
    """On how many tasks with all three setups the final success strictly follows one < slow-fast <
    slow-fast-critic (the paper's agent-structure ablation); "" when no task has all three."""
    runs = ablation_runs(runs)
    held, tasks = [], []
    for task in dict.fromkeys(r["task"] for r in runs):
        by_setup = {r["agents"]: r["success_rate"] for r in runs if r["task"] == task}
        if not all(s in by_setup for s in AGENT_SETUPS):
            continue
        tasks.append(task)
        rates = [by_setup[s] for s in AGENT_SETUPS]
        if all(a < b for a, b in itertools.pairwise(rates)):
            held.append(task)
    if not tasks:
        return ""
    order = " < ".join(f"`{s}`" for s in AGENT_SETUPS)
    where = f" ({joined([f'`{t}`' for t in held])})" if held else ""
    return (f"The paper's ordering of final success, {order} strictly, held on {len(held)} of {len(tasks)} "
            f"task{'s' if len(tasks) != 1 else ''}{where}.")


# --- success per iteration --------------------------------------------------------------------------
def iteration_table(runs: list[dict[str, Any]]) -> list[str]:
    """Task, mode, setup, the success after each outer iteration (n/a: not evaluated; -: the run had ended), final."""
    runs = iteration_runs(runs)
    width = max(len(iterations(r)) for r in runs)
    rows = []
    for r in runs:
        rates = iterations(r)
        cells = [NOT_EVALUATED if rate is None else fmt_pct(rate) for rate in rates]
        rows.append((r["task"], r["mode"], r.get("agents") or "-", *cells, *[NO_ITERATION] * (width - len(rates)),
                     fmt_pct(r["success_rate"])))
    return markdown_table(("task", "mode", "agents", *(f"after iteration {i}" for i in range(width)), "final"),
                          rows, "lll" + "r" * (width + 1))


def iteration_sentence(runs: list[dict[str, Any]]) -> str:
    """How success moved from the first to the last evaluated iteration, and how many iterations had no chain."""
    runs = iteration_runs(runs)
    moved = {"rose": [], "stayed the same": [], "fell": []}
    for r in runs:
        rates = [rate for rate in iterations(r) if rate is not None]
        if len(rates) >= 2:
            key = "rose" if rates[-1] > rates[0] else "fell" if rates[-1] < rates[0] else "stayed the same"
            moved[key].append(r)
    compared = sum(len(v) for v in moved.values())
    cells = sum(len(iterations(r)) for r in runs)
    missing = sum(rate is None for r in runs for rate in iterations(r))
    parts = []
    if compared:
        counts = []
        for what, rs in moved.items():
            if rs:
                which = ", ".join(f"`{r['task']}` {label(r)}" for r in rs)
                counts.append(f"{what} in {len(rs)}" + (f" ({which})" if what != "stayed the same" else ""))
        parts.append(f"Of the {compared} run{'s' if compared != 1 else ''} with at least two evaluated iterations, "
                     f"success from the first to the last evaluated iteration {joined(counts)}.")
    else:
        parts.append("No run had two evaluated iterations to compare.")
    if missing:
        parts.append(f"{missing} of {cells} iterations could not be evaluated ({NOT_EVALUATED}: no controller for "
                     "the whole task yet, or its evaluation failed).")
    return " ".join(parts)


# --- the section ------------------------------------------------------------------------------------
def budget_text(results: dict[str, Any]) -> str:
    """The budget, whether it is the bench's default (and why that default), and the time the runs took."""
    st, runs = results["settings"], results["runs"]
    evaluations = ("the evaluations of {} whole-task episodes after each outer iteration and at the end"
                   if iteration_runs(runs) else "the final evaluation of {} whole-task episodes")
    text = (f"budget {st['frames']:,} env frames per run (skill tests and training; "
            f"{evaluations.format(st['eval_episodes'])} are not counted)")
    if st.get("default_frames") == st["frames"] and st.get("default_runs"):
        text += (f", the bench's default, chosen to keep its {st['default_runs']} default runs within about an hour "
                 "on 2 cores with the embedded model (an estimate; the measured time follows)")
    minutes = results["total_seconds"] / 60
    return text + f"; O={st['outer']}, I={st['inner']}; {len(runs)} runs in {minutes:.0f} min in all"


def per_mode_minutes(runs: list[dict[str, Any]]) -> str:
    """'minutes per run: pure-rl 3.1, rl-gpt (one) 4.0, ...' (mean over tasks), from the runs' seconds."""
    names = list(dict.fromkeys(label(r) for r in runs if "seconds" in r))
    if not names:
        return ""
    means = [(n, [r["seconds"] for r in runs if label(r) == n and "seconds" in r]) for n in names]
    return "Minutes per run (mean over the tasks): " + ", ".join(
        f"`{n}` {sum(s) / len(s) / 60:.1f}" for n, s in means) + "."


def render_section(results: dict[str, Any], figure: Path | None = None,
                   iterations_figure: Path | None = None, title: str = TITLE) -> str:
    """The section; with ``figure`` (next to the markdown file's figures/) the plots are drawn and linked (the
    per-iteration one at ``iterations_figure``, by default next to ``figure``); each run's date in the table."""
    runs = results["runs"]
    rows = [(r["task"], r["mode"], r.get("agents") or "-", fmt_pct(r["success_rate"]),
             f"{r['frames_to_first_training_success']:,}" if r["frames_to_first_training_success"] is not None else "-",
             f"{r['training_frames']:,}", f"{r.get('skill_test_frames', 0):,}", r["tokens"],
             f"error: {r['error'][:60]}" if r["error"] else r["plan"] or "-", r.get("controller") or "-",
             f"{r['seconds'] / 60:.1f}" if "seconds" in r else "-", library_cell(r), measured_cell(results, r))
            for r in runs]
    lines = [title, "", f"{measured_text(results)}{budget_text(results)}.", "",
             *markdown_table(("task", "mode", "agents", "final success", "training frames to first success",
                              "training frames", "skill-test frames", "LLM tokens", "last plan (or error)",
                              "final controller", "min", "library at start", "measured"), rows, "lllrrrrrllrll"),
             "",
             "All numbers come from the planner's `WatchRun` events: the final success and controller from `run_end`, "
             "the success after each outer iteration from `iteration_end`, tokens from the `llm` events, training "
             "frames from the last `training` progress of each job, skill-test frames from the `code` events, the "
             f"last plan from the last `plan` event. `{REFERENCE_MODE}` has no planner run: its numbers come from the "
             "learner's `WatchJob` and `Evaluate`.", "",
             "Modes: `pure-rl` trains on the whole task with primitive actions only (no LLM); `pure-code` has the "
             "fast agent write a skill per sub-task and runs their chain; `rl-gpt` is the two loops (slow agent "
             "decides code or RL, coded skills join the RL action space); "
             f"`{REFERENCE_MODE}` is pure RL's training with the hand-written reference skills "
             f"({', '.join(results['reference_skills'])}) as macro actions. Agent setups (the planner's "
             "`StartRunRequest.agents`): `one` (one LLM plans, codes and configures in one answer per outer iteration; "
             "no critic), "
             f"`slow-fast` (no critic), `slow-fast-critic`. {library_text(runs)}", ""]
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    lines += [" ".join(ranking(task, [r for r in runs if r["task"] == task]) for task in tasks), ""]
    pairs = [paired_sentence(task, [r for r in runs if r["task"] == task]) for task in tasks]
    if any(pairs):
        lines += [" ".join(p for p in pairs if p), ""]
    over = overspent(runs, int(results["settings"]["frames"]))
    if over:
        lines += [over, ""]
    minutes = per_mode_minutes(runs)
    if minutes:
        lines += [minutes, ""]

    ablation = ablation_runs(runs)
    lines += ["### Agent ablation (the paper's agent-structure ablation)", ""]
    if ablation:
        sentences = [ablation_sentence(task, [r for r in ablation if r["task"] == task])
                     for task in dict.fromkeys(r["task"] for r in ablation)]
        order = paper_order_sentence(runs)
        lines += ["Final success of `rl-gpt` per agent setup; in parentheses the whole task's success after each "
                  f"outer iteration ({NOT_EVALUATED}: not evaluated).", "", *ablation_table(runs), "",
                  " ".join([*sentences, *([order] if order else [])]), ""]
    else:
        lines += ["These results record no agent setup per run (saved before the ablation was added): no "
                  "ablation to show.", ""]

    lines += ["### Success per iteration", ""]
    if iteration_runs(runs):
        lines += ["The whole task's chain (each sub-task's skill or policy, run in plan order) evaluated on "
                  f"{results['settings']['eval_episodes']} episodes after every outer iteration, on worlds of its "
                  "own (the same every iteration), apart from the final evaluation's: the final success may differ "
                  f"from the last iteration's. {NOT_EVALUATED}: not evaluated; {NO_ITERATION}: the run had ended "
                  "(every sub-task done or the frame budget spent).", "", *iteration_table(runs), "",
                  iteration_sentence(runs), ""]
    else:
        lines += ["These results record no success per iteration (no run with `iteration_end` events).", ""]

    if figure is not None:
        plot_modes(results, figure)
        lines += [f"![success by mode](figures/{figure.name})", ""]
        if iteration_runs(runs):
            iterations_figure = iterations_figure or figure.with_name(figure.name.replace(FIGURE, ITERATIONS_FIGURE))
            plot_iterations(results, iterations_figure)
            lines += [f"![success per iteration](figures/{iterations_figure.name})", ""]
    return "\n".join(lines)
