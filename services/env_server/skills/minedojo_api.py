"""The `agent` object of MineDojo skills: the perception keys documented in MINEDOJO_SKILL_API.

Runs in the sandbox worker like :class:`~services.env_server.skills.api.CrafterAgent`; every value
returned is a fresh copy of plain data.
"""

from __future__ import annotations

import copy
from typing import Any

_FIELDS = ("position", "yaw", "pitch", "life", "food", "oxygen", "biome_id", "inventory", "inventory_all",
           "mainhand", "voxels", "blocks_in_sight", "entities_in_sight", "nearby_crafting_table", "nearby_furnace")


class MineDojoAgent:
    """Perception of one MineDojo player, refreshed by the worker before every resume of the skill."""

    def __init__(self, actions: list[str]):
        self._actions = tuple(actions)
        self._state: dict[str, Any] = {}
        self._steps = 0

    def _update(self, perception: dict[str, Any], steps: int) -> None:
        self._state = perception
        self._steps = steps

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not defined on the class; underscore names never reach here from skills.
        if name in _FIELDS:
            return copy.deepcopy(self._state.get(name))
        raise AttributeError(f"agent has no attribute {name!r}; see the skill API for what it offers")

    @property
    def actions(self) -> tuple[str, ...]:
        return self._actions

    @property
    def steps(self) -> int:
        return self._steps
