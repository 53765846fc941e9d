"""A run's report: ``report.md`` and its PNG plots in the run directory.

The planner writes them when a run ends, fails or stops, and serves them with ``GetRunReport``: a client never
reads the run directory (on a cluster it cannot). ``rlgpt report RUN_DIR`` writes them again for a run
directory on the local disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib
from google.protobuf import json_format

matplotlib.use("Agg")  # headless: reports are written on servers and in CI
import matplotlib.pyplot as plt

from rlgpt.errors import FailedPrecondition
from rlgpt.v1 import planner_pb2
from services.planner.agents.texts import choices_text, last_shares
from services.planner.program_code import program_of
from services.planner.programs import step_text
from services.planner.state import RunState

REPORT_FILES = ("report.md", "curves.png", "iterations.png")
"""The report's files, the markdown first: what ``GetRunReport`` sends."""
CURVES, ITERATIONS = REPORT_FILES[1:]
CHUNK_BYTES = 1 << 20
"""Content of one ``ReportChunk`` at most."""


def outcome(state: int, error: str = "") -> str:
    """How a run ended, in words, for the report's header (``state``: a ``RunState`` value)."""
    if state == planner_pb2.RUN_STATE_DONE:
        return "finished"
    if state == planner_pb2.RUN_STATE_STOPPED:
        return "stopped on request; resumable (rlgpt run --resume RUN_ID)"
    if state == planner_pb2.RUN_STATE_FAILED:
        return f"failed: {error[:500]}" if error else "failed"
    return "running: this report is partial"


def plot_subtask_curves(state: RunState, path: Path) -> Path:
    """Success rate vs env frames: training curves of RL sub-tasks, test results of coded attempts."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, sub in state.subtasks.items():
        trainings: dict[str, list[dict[str, float]]] = {}
        for point in sub.curve:
            trainings.setdefault(str(point.get("job_id", "")), []).append(point)
        for k, points in enumerate(trainings.values(), 1):
            # Numbered per sub-task: two inner attempts of one outer iteration are two trainings.
            label = f"{name} (RL training {k}, outer iteration {points[0].get('iteration', 0)})"
            frames = [p["env_frames"] for p in points]
            [line] = ax.plot(frames, [p["success_rate"] for p in points], label=label)
            if any("skill_frame_fraction" in p for p in points):  # how much of the training the skills played
                ax.plot(frames, [p.get("skill_frame_fraction", 0.0) for p in points], linestyle=":",
                        color=line.get_color(), label=f"{name}: training {k}'s share of frames inside coded skills")
        if sub.tests:
            coded = sub.decision == "code"
            ax.scatter([t.get("frames", 0) for t in sub.tests], [t.get("success_rate", 0.0) for t in sub.tests],
                       marker="o" if coded else "s", label=f"{name} ({'code tests' if coded else 'evaluations'})")
    ax.set_xlabel("env frames spent on the sub-task")
    ax.set_ylabel("success rate (dotted: share of frames in skills)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Sub-tasks: success rate vs env frames")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_iterations(state: RunState, path: Path) -> Path:
    """Tokens per outer iteration, and the whole task's success after each iteration and at the end."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    iterations = [int(i["iteration"]) for i in state.iterations]
    left.bar(iterations, [i["tokens"] for i in state.iterations], color="tab:blue")
    left.set_xticks(iterations)  # whole iterations only
    left.set_xlabel("outer iteration")
    left.set_ylabel("LLM tokens")
    left.set_title("Tokens per iteration")
    final = state.final or {}
    labels = [f"iter {i}" for i in iterations] + ["final"]
    rates = [it.get("success_rate") for it in state.iterations] + [float(final.get("success_rate", 0.0))
                                                                   if state.final else None]
    colors = ["tab:olive"] * len(iterations) + ["tab:green"]
    positions = list(range(len(labels)))
    right.bar(positions, [r or 0.0 for r in rates], color=colors)
    for x, rate in zip(positions, rates, strict=True):
        # Written on its bar with a marker, so a 0% result shows as such, not as an empty slot.
        if rate is None:  # not evaluated: no marker, a grey note
            right.annotate("n/a", (x, 0.0), xytext=(0, 6), textcoords="offset points", ha="center", color="grey")
            continue
        right.plot([x], [rate], marker="_" if rate else "o", color="black", markersize=10)
        right.annotate(f"{rate:.0%}", (x, rate), xytext=(0, 6), textcoords="offset points", ha="center",
                       fontsize=11, fontweight="bold")
    right.set_xticks(positions, labels)
    right.set_ylim(0, 1.15)
    right.set_ylabel("whole-task success rate")
    right.set_title(f"Whole-task success per iteration ({final.get('episodes', 0)} episodes)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _request(run_dir: Path) -> planner_pb2.StartRunRequest:
    path = run_dir / "request.json"
    if not path.exists():
        raise FailedPrecondition(f"{run_dir} is not a run directory: {path.name} is missing")
    try:
        return json_format.Parse(path.read_text(), planner_pb2.StartRunRequest())
    except (json_format.ParseError, ValueError) as exc:
        raise FailedPrecondition(f"run directory is corrupt: {path} cannot be read ({str(exc)[:200]})") from None


def skills_section(state: RunState) -> list[str]:
    """Which skills the LLM wrote (the program's steps where it wrote a program) and how each RL training used
    the coded skills of its action space (the share of its frames they played, at the end of the training)."""
    lines = ["## Skills the LLM wrote", ""]
    written = [(name, sub) for name, sub in state.subtasks.items() if sub.skill_code]
    for name, sub in written:
        steps = program_of(sub.skill_code)
        what = ("program: " + ", then ".join(step_text(step) for step in steps) if steps else
                f"Python, {len(sub.skill_code.splitlines())} lines")
        lines.append(f"- {name} ({sub.status}, best test success {sub.success_rate:.0%}): {what}")
    if not written:
        lines.append("- none: no sub-task was coded")
    trained = [(name, sub) for name, sub in state.subtasks.items() if sub.curve]
    if trained:
        lines += ["", "## How RL used the skills", ""]
    for name, sub in trained:
        last = sub.curve[-1]
        skills = list((sub.rl_config or {}).get("skills", []))
        share = last.get("skill_frame_fraction")
        lines.append(f"- {name}: skills in its action space: {', '.join(skills) or 'none'}; at the end of its last "
                     f"training {'-' if share is None else f'{share:.0%}'} of the frames were played by them")
    return [*lines, ""]


def briefing_text(kept: dict[str, Any]) -> str:
    """What a revision was told of the training's scores: the policy and the plan alone on worlds of its own."""
    briefing = kept.get("briefing") or {}
    if "plan_alone_success_rate" not in briefing:
        return " and these scores" if not briefing else ""  # a state from before briefings were scored apart
    return (f" and, on {briefing['episodes']} other worlds, the policy {briefing['success_rate']:.0%} and the plan "
            f"alone {briefing['plan_alone_success_rate']:.0%}")


def kept_plan_section(kept: dict[str, Any] | None) -> list[str]:
    """The training around the kept plan (RL inside the chain), when the run had one: who configured it, with
    what, and how it and the plan alone did on the same worlds."""
    if not kept:
        return []
    chain = f"{kept['chain_success_rate']:.0%}"
    lines = ["## RL around the kept plan", "",
             f"Every sub-task was coded and done but the chain scored {chain} after the last iteration, so a policy "
             "was trained around the plan (the plan one macro action next to the actions below)."]
    if kept.get("config_by"):
        terms = ", ".join(f"{t['kind']}{' ' + t['target'] if t.get('target') else ''} {t['weight']:+g}"
                          for t in kept.get("reward_terms", []))
        lines.append(f"Configured by the {kept['config_by']}: K={kept.get('skill_max_steps')}, primitives "
                     f"{', '.join(kept.get('primitive_actions', [])) or 'all'}, macro actions "
                     f"{', '.join(kept.get('macro_actions', [])) or 'none'}; reward {terms}.")
        for refused in kept.get("refused_macro_actions", []):
            lines.append(f"Macro action {refused['name']} was refused by its test run: {refused['error']}")
        if kept.get("config_error"):
            lines.append(f"The fast agent's answer was unusable: {kept['config_error']}")
    for number, earlier in enumerate(kept.get("earlier", []), 1):
        lines.append(f"Training {number} (job {earlier.get('job_id', 'none')}): " + (
            f"the policy {earlier['success_rate']:.0%}, the plan alone {earlier['plan_alone_success_rate']:.0%} on "
            "the same worlds" if "plan_alone_success_rate" in earlier else earlier.get("error", "not scored"))
            + "; the fast agent revised its config, told its answer, the learning curve" + briefing_text(earlier)
            + ".")
    if kept.get("revision"):
        lines.append(f"Training {kept['revision'] + 1}, the last revision:")
    if kept.get("error"):
        return [*lines, f"The training failed: {kept['error']}", ""]
    if (kept.get("briefing") or {}).get("error"):
        lines.append(f"Its revision's briefing could not be scored: {kept['briefing']['error']}")
    if choices := choices_text(last_shares(kept.get("curve", [])), kept.get("config_name", "")):
        lines.append(choices)
    alone = kept.get("plan_alone_success_rate", kept["chain_success_rate"])
    better = kept["success_rate"] > alone
    lines.append(f"Job {kept['job_id']}: the policy scored {kept['success_rate']:.0%} and the plan alone "
                 f"{alone:.0%} on the same worlds: "
                 + ("the policy is the final controller." if better else "the chain stays the final controller."))
    return [*lines, ""]


def write_run_report(run_dir: Path, state: RunState | None = None, ended: str = "") -> Path:
    """Writes report.md, curves.png and iterations.png into ``run_dir``; returns report.md's path.

    ``state``: the run's state (read from state.json when not given; a corrupt file raises FailedPrecondition
    naming it). ``ended``: how the run ended (``outcome``), one line of the header when given.
    """
    run_dir = Path(run_dir)
    request = _request(run_dir)
    state = state if state is not None else RunState.load(run_dir)
    task = request.task
    final = state.final or {}
    curves = plot_subtask_curves(state, run_dir / CURVES)
    iterations_png = plot_iterations(state, run_dir / ITERATIONS)
    lines = [f"# RL-GPT run: {task.name or task.description or 'task'}", "",
             f"- mode: {request.mode or 'rl-gpt'}, agents: {request.agents or 'slow-fast-critic'}, "
             f"seed: {request.seed}"]
    if ended:
        lines.append(f"- outcome: {ended}")
    lines += [f"- final task success: **{final.get('success_rate', 0.0):.0%}** over {final.get('episodes', 0)} "
              f"episodes ({final.get('controller', 'not evaluated')})",
              f"- env frames spent (skill tests + training): {state.frames_used}", "",
              "## Sub-tasks", "", "| sub-task | decision | status | success rate | frames | attempts |",
              "|---|---|---|---:|---:|---:|"]
    for name, sub in state.subtasks.items():
        lines.append(f"| {name} | {sub.decision} | {sub.status} | {sub.success_rate:.0%} | {sub.frames} | "
                     f"{len(sub.tests)} |")
    lines += ["", f"![success vs frames]({curves.name})", "", "## Iterations", "",
              "| iteration | LLM tokens | seconds | env frames | whole-task success | chain evaluated |",
              "|---:|---:|---:|---:|---:|---|"]
    for it in state.iterations:
        rate = it.get("success_rate")
        chain = str(it.get("controller", "")).replace("|", "/")
        lines.append(f"| {int(it['iteration'])} | {int(it['tokens'])} | {it['seconds']:.0f} | {int(it['frames'])} | "
                     f"{'n/a' if rate is None else f'{rate:.0%}'} | {chain} |")
    lines += ["", f"![tokens and success per iteration]({iterations_png.name})", ""]
    lines += kept_plan_section(state.kept_plan)
    if final.get("links"):
        lines += ["## The final chain, link by link", "", "| link | episodes reaching it | met its conditions | "
                  "mean frames in it |", "|---|---:|---:|---:|"]
        lines += [f"| {link['name']} | {link['reached']} | {link['succeeded']} | {link['mean_frames']:.0f} |"
                  for link in final["links"]]
        lines.append("")
    lines += skills_section(state)
    lines += ["## The plan as it evolved", ""]
    for number, plan in enumerate(state.plans):
        steps = ", ".join(f"{s['name']} ({'code' if s.get('decision') == 'DECISION_CODE' else 'rl'})"
                          for s in plan.get("subtasks", []))
        lines.append(f"{number + 1}. {steps}" + (f" - {plan['rationale'][:200]}" if plan.get("rationale") else ""))
    lines.append("")
    path = run_dir / REPORT_FILES[0]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines))
    tmp.replace(path)  # a reader never sees half a report
    return path


def report_chunks(run_dir: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[planner_pb2.ReportChunk]:
    """The report's files as ``ReportChunk`` messages, report.md first; files that were not written are left out."""
    for name in REPORT_FILES:
        path = run_dir / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        for offset in range(0, max(len(data), 1), chunk_bytes):
            yield planner_pb2.ReportChunk(name=name, offset=offset, content=data[offset:offset + chunk_bytes],
                                          size=len(data))
