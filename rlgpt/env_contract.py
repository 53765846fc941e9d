"""The names of the env server's wire contract. Actions: a session's action space lists its primitives by name,
then each skill as ``skill:<name>`` (CreateSessionRequest.skills), then the kept plan's action ``plan``
(CreateSessionRequest.plan). Both sides import them from here: the server names its actions with them, and
clients find the skill and plan actions of ``CreateSessionResponse.actions`` by them. Objectives: a task whose
objective is the whole game (TaskSpec.objective)."""

from __future__ import annotations

from collections.abc import Callable

SKILL_PREFIX = "skill:"
"""Skill actions are named ``skill:<name>`` in a session's action space."""
PLAN_ACTION = "plan"
"""The action a kept plan adds (CreateSessionRequest.plan), after the skills."""
GAME_OBJECTIVE = "game"
"""TaskSpec.objective of a task whose objective is the game itself, as its benchmark scores it (ResolveTask fills
it in for the game's task, e.g. "crafter")."""


def is_macro(action: str) -> bool:
    """Whether an action name is a macro action (a skill or the kept plan), which may take up to K frames."""
    return action.startswith(SKILL_PREFIX) or action == PLAN_ACTION


def action_name(action: str, skill_name: Callable[[str], str] = str) -> str:
    """An action of an RL action space as texts name it: "the plan", a primitive as itself, a skill (a library
    skill or a macro action) by ``skill_name`` of its registered name (whoever registered it knows how to shorten
    it)."""
    if action == PLAN_ACTION:
        return "the plan"
    return skill_name(action.removeprefix(SKILL_PREFIX)) if action.startswith(SKILL_PREFIX) else action
