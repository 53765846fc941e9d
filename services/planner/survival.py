"""A task's deaths, for the slow agent's re-plan (issue 36 item 2; issue 35 item 1 for every task): most failed
episodes end in the player's death, so every re-plan is told how the last whole-task evaluation's episodes died,
aggregated: how many died, of which causes (``EpisodeSummary.death_cause``, the env server's words), where (before
which of the plan's sub-tasks was done, from the episode's ``stages_done``, or after all of them), after how many
frames, and the last lines of one episode per main cause. The slow agent may then add sub-tasks that keep the
player alive, or rename the sub-tasks where it dies so that they are written again to survive: achievements and
items from Describe's lists, what restores or protects the player and where threats appear from Describe's rules
(the planner names no game fact itself). Episodes that did not die add nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rlgpt.prompts import shorten
from rlgpt.v1 import common_pb2, planner_pb2
from services.planner import game_task
from services.planner.context import RunContext

QUOTED_CAUSES, TAIL_LINES, LINE_CHARS = 2, 3, 120
"""Main causes whose one episode's trajectory end is quoted, its last lines, and the characters of one line."""
AFTER_PLAN = "after every sub-task of the plan was done"
HEADING = "Deaths in "
"""How the deaths text begins: feedback holding it allows the plan sub-tasks that keep the player alive."""


def died(episode: common_pb2.EpisodeSummary) -> bool:
    return bool(episode.death_cause) or episode.end_reason == "death"


def where(episode: common_pb2.EpisodeSummary, plan: planner_pb2.Plan | None) -> str:
    """Where in the plan an episode ended: before its first sub-task not done, or after all; "" when the episode
    does not say (no flag per sub-task)."""
    if plan is None or not plan.subtasks or len(episode.stages_done) != len(plan.subtasks):
        return ""
    return next((f"before {st.name} was done" for st, done in zip(plan.subtasks, episode.stages_done, strict=True)
                 if not done), AFTER_PLAN)


def _counted(counts: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.most_common())


def deaths_text(ctx: RunContext, episodes: Sequence[common_pb2.EpisodeSummary],
                plan: planner_pb2.Plan | None, rolled_back: bool = False) -> str:
    """The evaluation's deaths in words (module docstring); "" for a task that is not the game, or no death.
    ``rolled_back``: the evaluation was of a revision the run rolled back (``plan`` is that revision's), and the
    text says so: it is evidence about the revision, not about the plan in force."""
    dead = [e for e in episodes if died(e)]
    if not dead:
        return ""
    causes = Counter(e.death_cause or "unknown" for e in dead)
    places = Counter(place for e in dead if (place := where(e, plan)))
    frames = sum(e.steps for e in dead) / len(dead)
    length = game_task.episode_frames(ctx.run.request.task, ctx.settings)
    whole = "the whole game's" if ctx.game else "the whole task's"
    evaluated = "the rolled-back revision's evaluation" if rolled_back else f"{whole} last evaluation"
    lines = [f"{HEADING}{evaluated}: {len(dead)} of {len(episodes)} episodes ended with the "
             f"player's death, after {frames:.0f} frames on average (an episode lasts up to {length} frames); by "
             f"cause: {_counted(causes)}."]
    if places:
        lines.append(f"Where: {_counted(places)}.")
    for cause, _ in causes.most_common(QUOTED_CAUSES):
        first = next(e for e in dead if (e.death_cause or "unknown") == cause)
        tail = [shorten(line.strip(), LINE_CHARS) for line in first.text.splitlines() if line.strip()][-TAIL_LINES:]
        if tail:
            lines.append(f"The last lines of an episode that died of {cause}: " + " | ".join(tail))
    counts = ("Every achievement unlocked before death counts" if ctx.game else
              "An episode whose player dies before the task is done fails")
    lines.append(f"{counts}, so the plan may add sub-tasks that keep the player alive against these causes "
                 "(achievements and items from the lists above; what restores and protects the player, and where and "
                 "when threats appear, as far as the game's rules above say), before or among the sub-tasks where the "
                 "player dies, and may rename a sub-task where it dies, with a description that says how to stay alive "
                 "while it works, so that its skill is written again (from the code of the link it replaces).")
    return "\n".join(lines)


def reported(feedback: str) -> bool:
    """Whether the slow agent's feedback tells it of deaths: its plan may then add sub-tasks that keep the player
    alive, whatever the goal needs (the plan rules' side-quest check is off for them)."""
    return any(line.startswith(HEADING) for line in feedback.splitlines())


def joined(*parts: str) -> str:
    """The slow agent's feedback, its parts in order, one a line (any may be empty): the deaths come last."""
    return "\n".join(part for part in parts if part)
