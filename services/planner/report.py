"""A run's report: ``report.md``, its PNG plots and the final controller's GIFs in the run directory.

The planner writes them when a run ends, fails or stops, and serves them with ``GetRunReport``: a client never
reads the run directory (on a cluster it cannot). ``rlgpt report RUN_DIR`` writes them again for a run
directory on the local disk.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from rlgpt.errors import FailedPrecondition
from rlgpt.v1 import planner_pb2
from services.planner.agents.texts import choices_text, last_shares
from services.planner.animations import ANIMATIONS_DIR
from services.planner.game_task import is_game
from services.planner.program_code import program_of
from services.planner.programs import step_text
from services.planner.report_evaluations import (
    animations_section,
    evaluation_text,
    final_line,
    links_section,
    verdicts_section,
)
from services.planner.report_game import achievements_section, frames_line, measure_text, score_line
from services.planner.report_plots import plot_iterations, plot_subtask_curves
from services.planner.state import RunState

REPORT_FILES = ("report.md", "curves.png", "iterations.png")
"""The report's fixed files, the markdown first; ``GetRunReport`` sends them and the GIFs under animations/."""
GIF_NAME = re.compile(r"[A-Za-z0-9_-]{1,100}\.gif")
"""The names of the animations sent (those :func:`~services.planner.animations.write_animations` writes)."""
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
    target = request.budgets.target_success if request.budgets.HasField("target_success") else None
    curves = plot_subtask_curves(state, run_dir / CURVES)
    iterations_png = plot_iterations(state, run_dir / ITERATIONS, target)
    lines = [f"# RL-GPT run: {task.name or task.description or 'task'}", "",
             f"- mode: {request.mode or 'rl-gpt'}, agents: {request.agents or 'slow-fast-critic'}, "
             f"seed: {request.seed}"]
    if ended:
        lines.append(f"- outcome: {ended}")
    if state.stop_reason:
        lines.append(f"- stopped because: {state.stop_reason}")
    game = is_game(task)  # the whole game as the task: measured by its score, every frame counted
    measure_head = "success rate (a final-controller candidate: its score)" if game else "success rate"
    lines += [score_line(final, target) if game else final_line(final),
              frames_line(state) if game else f"- env frames spent (skill tests + training): {state.frames_used}",
              "", "## Sub-tasks", "", f"| sub-task | decision | status | {measure_head} | frames | attempts |",
              "|---|---|---|---:|---:|---:|"]
    for name, sub in state.subtasks.items():
        measure = measure_text(state, task.name, sub) if game else f"{sub.success_rate:.0%}"
        lines.append(f"| {name} | {sub.decision} | {sub.status} | {measure} | {sub.frames} | {len(sub.tests)} |")
    lines += ["", f"![success vs frames]({curves.name})", "", "## Iterations", "",
              "| iteration | LLM tokens | seconds | env frames | whole-task success | chain evaluated |",
              "|---:|---:|---:|---:|---|---|"]
    for it in state.iterations:
        chain = str(it.get("controller", "")).replace("|", "/")
        lines.append(f"| {int(it['iteration'])} | {int(it['tokens'])} | {it['seconds']:.0f} | {int(it['frames'])} | "
                     f"{evaluation_text(it)} | {chain} |")
    lines += ["", f"![tokens and success per iteration]({iterations_png.name})", ""]
    lines += achievements_section(state)
    lines += animations_section(final) + links_section(state) + verdicts_section(state)
    lines += [] if game else kept_plan_section(state.kept_plan)  # a game's is a candidate in its achievements
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


def report_files(run_dir: Path) -> list[str]:
    """The report's files that were written, relative to ``run_dir``, report.md first: the fixed files, then the
    GIFs under animations/ (plain files of plain names only; a link is not followed out of the run directory)."""
    run_dir = Path(run_dir)
    folder = run_dir / ANIMATIONS_DIR
    gifs = [] if folder.is_symlink() else sorted(f"{ANIMATIONS_DIR}/{p.name}" for p in folder.glob("*.gif")
                                                 if GIF_NAME.fullmatch(p.name))
    return [name for name in (*REPORT_FILES, *gifs)
            if (run_dir / name).is_file() and not (run_dir / name).is_symlink()]


def report_chunks(run_dir: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[planner_pb2.ReportChunk]:
    """The report's files (:func:`report_files`) as ``ReportChunk`` messages named by their path relative to the
    run directory, report.md first."""
    for name in report_files(run_dir):
        data = (run_dir / name).read_bytes()
        for offset in range(0, max(len(data), 1), chunk_bytes):
            yield planner_pb2.ReportChunk(name=name, offset=offset, content=data[offset:offset + chunk_bytes],
                                          size=len(data))
