"""The prompt texts the agents share: Describe's vocabulary, rules, skill API, reward kinds and observation in
words, the skill library offered, and a training's learning curve and choices. Game facts come from Describe only."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, TypeVar

from rlgpt.env_contract import action_name
from rlgpt.prompts import conditions_text
from rlgpt.reward_kinds import REWARD_KINDS, offered
from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.answer_forms import macro_short_name
from services.planner.schemas import MIN_ENV_FRAMES
from services.planner.skill_library import LibrarySkill, SkillLibrary

MAX_OFFERED_SKILLS = 16
"""Library skills offered to an agent (listed in its prompt and allowed by its schema: the same set)."""
MAX_SHOWN_CODE = 2
"""Library skills whose code the fast agent sees (the most relevant to its sub-task)."""
MAX_SHOWN_CODE_CHARS = 2500
"""A library skill's code is shown whole or not at all (cut code cannot be copied)."""
MAX_SHOWN_MACRO_CHARS = 5000
"""The previous config's macro actions' code shown to the fast agent, all together (each one whole, at most
MAX_SHOWN_CODE_CHARS, or not at all): the revision prompt stays within a small model's context."""
MAX_CURVE_POINTS = 6
"""Points of the last training's learning curve shown to the fast agent when it revises an RL config."""


def describe_env(describe: env_pb2.DescribeResponse) -> str:
    """The environment line of a prompt: the backend, its actions, achievements and items (Describe's)."""
    return (f"backend {describe.backend}; actions: {', '.join(describe.actions)}\n"
            f"achievements: {', '.join(describe.achievements)}\nitems: {', '.join(describe.items)}")


def rules_text(describe: env_pb2.DescribeResponse) -> str:
    """The world's rules as Describe serves them."""
    return describe.rules.text.strip() or "(the env server serves no rules for this backend)"


def skill_api_text(describe: env_pb2.DescribeResponse) -> str:
    """The skill API as Describe serves it; the rules appended when the server's text lacks them."""
    api = describe.skill_api.strip()
    if describe.rules.text and describe.rules.text.strip() not in api:
        api += "\n\nThe world's rules (generated from the game itself):\n" + describe.rules.text.strip()
    return api


def reward_kinds_text(describe: env_pb2.DescribeResponse, leave_out: tuple[str, ...] = ()) -> str:
    """The kinds the env server lists (Describe) that an agent's RL config can use (``offered``, less
    ``leave_out``), each with what it pays (rlgpt.reward_kinds); a kind listed that rlgpt.reward_kinds does not
    describe is shown by name."""
    return "\n".join(f"- {kind}: {REWARD_KINDS[kind].doc}" if kind in REWARD_KINDS else f"- {kind}"
                      for kind in offered(describe.reward_kinds) if kind not in leave_out) or "(none listed)"


def observable_text(describe: env_pb2.DescribeResponse) -> str:
    """The observation vector's groups and their entries, as Describe names them (for ``observe``), then what
    they hold as Describe says it."""
    vector = next((f for f in describe.observation if f.name == "vector"), None)
    by_group: dict[str, list[str]] = {}
    for label in vector.labels if vector is not None else ():
        group, _, _ = label.partition("/")
        by_group.setdefault(group, []).append(label)
    names = "; ".join(f"{group} ({', '.join(labels)})" for group, labels in by_group.items()) or "(none)"
    return f"{names}. What they hold: {vector.description}" if vector is not None and vector.description else names


T = TypeVar("T")


def evenly(points: Sequence[T], limit: int) -> list[T]:
    """At most ``limit`` of ``points``, in order, spread evenly over them: the first and the last included."""
    if len(points) <= limit:
        return list(points)
    if limit <= 1:
        return list(points[-1:]) if limit == 1 else []
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def curve_text(points: list[dict[str, Any]], limit: int = MAX_CURVE_POINTS) -> str:
    """A training's learning curve in a few lines (frames trained: success rate, mean return): ``limit`` points
    spread evenly over it (:func:`evenly`). ``points``: one training's, in order, each with ``training_frames``
    (frames of that training) or else ``env_frames``."""
    if not points:
        return "(none)"
    points = evenly(points, limit)
    return "\n".join(f"- {int(p.get('training_frames', p.get('env_frames', 0)))} frames: success "
                     f"{float(p.get('success_rate', 0)):.0%}, mean return {float(p.get('mean_return', 0)):.2f}"
                     for p in points)


def choices_text(shares: dict[str, float], config_name: str = "") -> str:
    """What a trained policy chose in its last training episodes (``shares``: action -> share of its decisions,
    ``JobProgress.action_shares``), each action by the name its answer used (:func:`action_name`): the plan, a
    primitive, a library skill, or a macro action by the name the model wrote (``config_name``: the config that
    registered it)."""
    if not shares:
        return ""
    named = partial(macro_short_name, config_name) if config_name else str
    chosen = ", ".join(f"{action_name(action, named)} {share:.0%}"
                       for action, share in sorted(shares.items(), key=lambda item: -item[1]))
    return ("What the policy chose in its last training episodes (share of its decisions; the plan or a macro "
            f"action is one decision however many frames it plays): {chosen}.")


def last_shares(points: list[dict[str, Any]]) -> dict[str, float]:
    """The action shares of a training's curve: its last point that has them (``Attempts._watch``)."""
    return next((p["action_shares"] for p in reversed(points) if p.get("action_shares")), {})


def shown_macros(macros: dict[str, str], each: int = MAX_SHOWN_CODE_CHARS,
                 total: int = MAX_SHOWN_MACRO_CHARS) -> dict[str, str]:
    """The previous config's macro actions as its prompt shows them: each code whole while it (at most ``each``
    characters) and those before it fit (``total``), else a note in its place."""
    shown, left = {}, total
    for name, code in macros.items():
        if len(code) <= min(each, left):
            shown[name] = code
            left -= len(code)
        else:
            shown[name] = f"(code of {len(code)} characters, too long to show: write it anew, shorter)"
    return shown


def task_text(task: common_pb2.TaskSpec) -> str:
    """The task as a planning prompt names it: its description (or name) and its success conditions."""
    text = task.description or task.name
    if task.success:
        text += f" (success: {conditions_text(list(task.success))})"
    return text


def subtask_query(subtask: planner_pb2.SubTask) -> str:
    """What the library is searched with for a sub-task: its name, description and success conditions."""
    return f"{subtask.name} {subtask.description} {conditions_text(list(subtask.success))}"


def frames_choice_text(offered: int) -> str:
    """What the RL answer's ``env_frames`` may be, for an offer of ``offered`` frames."""
    if offered <= MIN_ENV_FRAMES:
        return f"`env_frames`: leave it out; {offered} frames is the least a training gets."
    return (f"`env_frames` (optional): train for fewer frames than that, at least {MIN_ENV_FRAMES}; leave it out to "
            f"train for all {offered} (more is never given).")


def offered_skills(library: SkillLibrary, query: str, limit: int = MAX_OFFERED_SKILLS) -> list[LibrarySkill]:
    """The library skills an agent is offered, by name: every skill that passed its tests, or, past ``limit``,
    the ``limit`` most relevant to ``query`` (then the most successful). Prompt and schema use this one list."""
    working = [s for s in library.all() if s.success_rate > 0]
    if len(working) > limit:
        chosen = {s.name: s for s in library.retrieve(query, k=limit) if s.success_rate > 0}
        for s in sorted(working, key=lambda s: (-s.success_rate, s.name)):
            if len(chosen) >= limit:
                break
            chosen.setdefault(s.name, s)
        working = list(chosen.values())
    return sorted(working, key=lambda s: s.name)


def library_text(skills: list[LibrarySkill], code_of: tuple[str, ...] = ()) -> str:
    """One line per skill (name, description, tested success rate); the code of the skills in ``code_of``."""
    if not skills:
        return "(empty: no coded skill has passed its tests yet)"
    lines = []
    for s in skills:
        lines.append(f"- {s.name}: {s.description} (tested success {s.success_rate:.0%})")
        if s.name in code_of:
            if len(s.code) <= MAX_SHOWN_CODE_CHARS:
                lines.append("  code:\n" + "\n".join(f"    {line}" for line in s.code.rstrip().splitlines()))
            else:
                lines.append(f"  (code of {len(s.code)} characters, too long to show)")
    return "\n".join(lines)
