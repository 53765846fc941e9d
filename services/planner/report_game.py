"""A game task's part of the run's report (:mod:`services.planner.game_task`): the final score in the header, the
frames spent against the budget (every frame counted), and each achievement's success rate with the score after
every iteration and in the final evaluation."""

from __future__ import annotations

from typing import Any

from services.planner.game_controller import controller_name
from services.planner.game_final import KEPT, MACRO, chosen
from services.planner.kept_plan import kept_plan_name
from services.planner.state import RunState, SubTaskState


def _score(record: dict[str, Any] | None) -> str:
    score = (record or {}).get("score")
    return "n/a" if score is None else f"{float(score):.1f}"


def score_line(final: dict[str, Any], target: float | None) -> str:
    """The header's line on the final evaluation: the score in bold, its episodes and worlds, the controller."""
    if not final or final.get("score") is None:
        why = final.get("error") or final.get("controller") if final else ""
        return f"- final score: not evaluated{f' ({why})' if why else ''}"
    episodes = int(final.get("episodes") or 0)
    worlds = f" on worlds {final['seed']}..{final['seed'] + episodes - 1}" if "seed" in final and episodes else ""
    aim = f", target {100.0 * target:.1f}" if target is not None else ""
    cut = int(final.get("episodes_cut") or 0)  # stopped at the run's episode cap (game_task.episode_cap)
    cap = (f"; {cut} of them stopped at the run's cap of {int(final.get('episode_cap') or 0):,} frames, alive"
           if cut else "")
    return (f"- final score: **{_score(final)}** over {episodes} episodes{worlds}{aim} "
            f"({final.get('controller', '')}){cap}")


def measure_text(state: RunState, task: str, sub: SubTaskState) -> str:
    """A sub-task's measure in the sub-tasks table: a game's final-controller candidates have no success condition,
    so theirs is the score they played to on the iteration worlds (not evaluated yet: n/a)."""
    candidates = {controller_name(task): state.game_controller, kept_plan_name(task): state.kept_plan}
    if sub.name in candidates:
        return f"score {_score(candidates[sub.name])}"
    return f"{sub.success_rate:.0%}"


def frames_line(state: RunState) -> str:
    """Every frame the run spent, against its budget, and how much of it the whole-task evaluations took."""
    budget = f"{state.frame_budget:,}" if state.frame_budget else "no limit"
    return (f"- env frames spent (everything: skill tests, trainings and evaluations): {state.frames_used:,} of "
            f"{budget}; {state.evaluation_frames:,} of them in whole-task evaluations")


def achievements_section(state: RunState) -> list[str]:
    """Each achievement's success rate (percent of the evaluation's episodes that unlocked it) and the score,
    after each iteration, for each policy trained after them and in the final evaluation; then the candidates
    for the final controller."""
    columns = [(f"iteration {int(it['iteration'])}", it) for it in state.iterations if it.get("achievement_rates")]
    for title, record in (("macro-action policy", state.game_controller), ("kept-plan policy", state.kept_plan)):
        if (record or {}).get("achievement_rates"):
            columns.append((title, record))
    if (state.final or {}).get("achievement_rates"):
        columns.append(("final", state.final))
    if not columns:
        return controllers_lines(state)
    names = list(columns[-1][1]["achievement_rates"])
    lines = ["## The game's achievements", "",
             "Success rate of each achievement: the percent of the evaluation's episodes that unlocked it. The "
             "score is exp(mean(ln(1 + s_i))) - 1 over these rates (rlgpt/game_score.py).", "",
             "| achievement | " + " | ".join(title for title, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for name in names:
        cells = [f"{float(record['achievement_rates'].get(name, 0.0)):.1f}%" for _, record in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **score** | " + " | ".join(f"**{_score(record)}**" for _, record in columns) + " |")
    return [*lines, "", *controllers_lines(state)]


def _resumed(record: dict[str, Any]) -> str:
    """What a candidate took over from before its run's stop (game_resume), as a part of its description."""
    return f"; after the run's stop: {record['resumed']}" if record.get("resumed") else ""


def _described(state: RunState, name: str) -> str:
    """A candidate in words: what it is and what it was trained with."""
    if name == MACRO:
        macro = state.game_controller or {}
        return ("APPO on the game's reward with the primitives and the plan's coded skills as macro actions "
                f"({', '.join(macro.get('macro_actions', [])) or 'none'}{_resumed(macro)})")
    if name == KEPT:
        kept = state.kept_plan or {}
        return (f"RL around the kept plan on the game's reward (steps {', '.join(kept.get('steps', [])) or 'none'};"
                f" K={kept.get('skill_max_steps', '?')}{_resumed(kept)})")
    return f"the best chain of the iterations (iteration {(state.best or {}).get('iteration')})"


def controllers_lines(state: RunState) -> list[str]:
    """The candidates for the final controller (services/planner/game_final.py), each with its score on the
    iterations' worlds and the frames it spent, and the one chosen; nothing when no policy was trained."""
    choice = chosen(state)
    if len(choice.controllers) < 2:
        return []
    lines = ["Candidates for the final controller, each scored on the iterations' worlds (the highest becomes "
             "the final controller):", "", "| controller | score | frames | job |", "|---|---:|---:|---|"]
    for c in choice.controllers:
        score = f"{c.score:.1f}" if c.HasField("score") else f"not scored: {c.error or 'no policy'}".replace("|", "/")
        lines.append(f"| {_described(state, c.name)} | {score} | {c.frames:,} | {c.job_id} |")
    return [*lines, "", f"The final controller: {_described(state, choice.chosen)}.", ""]
