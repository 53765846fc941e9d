"""The `agent` object skills receive (its documentation for prompts is :mod:`.api_doc`).

Runs inside the sandbox worker process next to untrusted code: pure Python, no imports beyond the
standard library, every attribute that skills must not reach starts with ``_`` (RestrictedPython
refuses such names at compile time), and every public value is a fresh copy of plain data.
"""

from __future__ import annotations

from typing import Any

from services.env_server.skills.navigation import (
    CREATURES,
    MOVES,
    STEPS,
    UNSEEN,
    WALKABLE,
    Cell,
    MapMemory,
    adjacent,
)
from services.env_server.skills.recipes import Recipes

_DIRECTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
_DEFAULT_AREA = (64, 64)


class CrafterAgent:
    """Perception of one Crafter player, refreshed by the worker before every resume of the skill."""

    def __init__(self, actions: list[str], recipes: Recipes | None = None):
        self._actions = tuple(actions)
        self._recipes = recipes or Recipes(None)
        self._map = MapMemory()
        self._state: dict[str, Any] = {}
        self._steps = 0
        self._targets: dict[str, Cell] = {}  # step_to's committed target per name
        self._frontier: Cell | None = None  # explore's committed goal

    def _remember(self, remembered: dict[str, Any]) -> None:
        """The map the episode showed before this skill started (BackendEnv.remembered), as if this run saw it."""
        palette, first, rows = remembered["palette"], int(remembered["first"]), remembered["rows"]
        names = [[UNSEEN if char == " " else palette[ord(char) - first] for char in row] for row in rows]
        self._map.update(names, (0, 0), (len(rows[0]) if rows else 0, len(rows)))

    def _update(self, perception: dict[str, Any], steps: int) -> None:
        self._state = perception
        self._steps = steps
        area = perception.get("area", _DEFAULT_AREA)
        self._map.update(perception["view"], tuple(perception["view_origin"]), (int(area[0]), int(area[1])))

    # --- plain perception -------------------------------------------------------------------------
    @property
    def actions(self) -> tuple[str, ...]:
        return self._actions

    @property
    def position(self) -> tuple[int, int]:
        return tuple(self._state["position"])

    @property
    def facing(self) -> tuple[int, int]:
        return tuple(self._state["facing"])

    @property
    def inventory(self) -> dict[str, int]:
        return dict(self._state["inventory"])

    @property
    def health(self) -> int:
        return self._state["status"]["health"]

    @property
    def food(self) -> int:
        return self._state["status"]["food"]

    @property
    def drink(self) -> int:
        return self._state["status"]["drink"]

    @property
    def energy(self) -> int:
        return self._state["status"]["energy"]

    @property
    def sleeping(self) -> bool:
        return self._state["sleeping"]

    @property
    def daylight(self) -> float:
        return self._state["daylight"]

    @property
    def achievements(self) -> list[str]:
        return sorted(self._state.get("achievements", ()))

    @property
    def view(self) -> list[list[str]]:
        return [list(row) for row in self._state["view"]]

    @property
    def steps(self) -> int:
        return self._steps

    # --- the current view -------------------------------------------------------------------------
    def _in_view(self, cell: Cell) -> str | None:
        x0, y0 = self._state["view_origin"]
        view = self._state["view"]
        row, column = cell[1] - y0, cell[0] - x0
        if 0 <= row < len(view) and 0 <= column < len(view[row]):
            return view[row][column]
        return None

    @staticmethod
    def _direction(direction: str) -> Cell:
        if direction not in _DIRECTIONS:
            raise ValueError(f"direction must be one of {sorted(_DIRECTIONS)}, got {direction!r}")
        return _DIRECTIONS[direction]

    def facing_cell(self) -> str | None:
        (x, y), (dx, dy) = self.position, self.facing
        return self._in_view((x + dx, y + dy))

    def look(self, direction: str) -> str | None:
        (x, y), (dx, dy) = self.position, self._direction(direction)
        return self._in_view((x + dx, y + dy))

    def is_free(self, direction: str) -> bool:
        return self.look(direction) in WALKABLE

    def face(self, direction: str) -> str:
        return MOVES[self._direction(direction)]

    def sees(self, name: str) -> bool:
        return any(name in row for row in self._state["view"])

    # --- the memory of the map --------------------------------------------------------------------
    def at(self, x: int, y: int) -> str | None:
        return self._map.name((int(x), int(y)))

    def nearest(self, name: str) -> tuple[int, int] | None:
        px, py = self.position
        best = min(((abs(x - px) + abs(y - py), y, x) for x, y in self._map.where.get(name, ())), default=None)
        return None if best is None else (best[2], best[1])

    def path_to(self, x: int, y: int) -> list[str] | None:
        """Moves that end next to (x, y) and facing it (breadth-first over remembered walkable cells)."""
        target = (int(x), int(y))
        found = self._map.route(self.position, self.facing, {_next(target, step) for step in STEPS})
        return None if found is None else self._moves(found, target)

    def _moves(self, found: tuple[Cell, list[Cell]], target: Cell) -> list[str]:
        cell, steps = found
        moves = [MOVES[step] for step in steps]
        face = (target[0] - cell[0], target[1] - cell[1])
        if (steps[-1] if steps else self.facing) != face:  # a move also turns the player its way
            moves.append(MOVES[face])
        return moves

    def step_to(self, name: str) -> str | None:
        if self.facing_cell() == name:
            self._targets.pop(name, None)
            return None
        targets = self._map.where.get(name)
        committed = self._targets.get(name)
        if committed is not None and (not targets or committed not in targets):
            committed = None  # gone (chopped, eaten, walked off) since it was chosen
        if targets:
            goals = {_next(target, step) for target in targets for step in STEPS}
            near_committed = frozenset(_next(committed, step) for step in STEPS) if committed else frozenset()
            # Creatures move, so only a search for a still thing can be known to fail until the map changes.
            found = self._map.route(self.position, self.facing, goals, near_committed,
                                    cache=None if name in CREATURES or name == "arrow" else ("step_to", name))
            if found is not None:
                cell = found[0]
                if committed is None or not adjacent(cell, committed):
                    committed = min((t for t in targets if adjacent(cell, t)), key=lambda t: (t[1], t[0]))
                self._targets[name] = committed
                moves = self._moves(found, committed)
                return moves[0] if moves else None
        self._targets.pop(name, None)
        return self.explore()

    # --- exploration ------------------------------------------------------------------------------
    def _diggable(self) -> frozenset[str]:
        """Names of cells "do" turns into walkable ones with the items held now (from the game's rules)."""
        inventory = self._state["inventory"]
        return frozenset(name for name, needs in self._recipes.diggable.items()
                         if all(inventory.get(item, 0) >= count for item, count in needs.items()))

    def explore(self) -> str:
        """A move toward the nearest frontier (committed until it is seen), digging when walled in."""
        start, memory = self.position, self._map
        if self._frontier is not None and self._frontier not in memory.frontier:
            self._frontier = None
        goals = memory.frontier - {start}
        committed = frozenset({self._frontier}) if self._frontier is not None else frozenset()
        found = memory.route(start, self.facing, goals, committed, cache="explore")
        diggable = frozenset() if found is not None else self._diggable()
        if diggable:  # walled in: dig through what the held tools allow
            found = memory.route(start, self.facing, goals, dig=diggable, cache=("dig", diggable))
        if found is None or not found[1]:
            self._frontier = None
            return "noop"  # everything reachable has been seen: waiting is all a move could do
        self._frontier = found[0]
        first = found[1][0]
        if not memory.free(_next(start, first), creatures_block=False) and self.facing == first:
            return "do"  # facing a diggable cell on the way: dig it
        return MOVES[first]

    # --- world rules --------------------------------------------------------------------------------
    def needs(self, name: str) -> dict[str, Any] | None:
        """What making, placing or collecting ``name`` (item, action or achievement) needs, from the rules."""
        return self._recipes.needs(name)

    def missing(self, name: str) -> list[str]:
        """What stops ``name`` from working here and now, in words; [] when it would work."""
        return self._recipes.missing(name, self._state["inventory"], self._nearby_names(), self.facing_cell())

    def can(self, name: str) -> bool:
        """True when ``name`` (e.g. "make_wood_pickaxe" or "table") would work here and now."""
        return not self.missing(name)

    def _nearby_names(self) -> set[str]:
        distance = self._recipes.nearby_distance
        view = self._state["view"]
        return {view[3 + dy][4 + dx] for dy in range(-distance, distance + 1) for dx in range(-distance, distance + 1)
                if 0 <= 3 + dy < len(view) and 0 <= 4 + dx < len(view[3 + dy])}


AGENT_CLASSES: dict[str, type] = {"crafter": CrafterAgent}


def make_agent(backend: str, actions: list[str], recipes: Recipes | None = None) -> Any:
    """The agent object for a backend's skills (``recipes``: the world's rules, where the backend has them)."""
    if backend == "minedojo":
        from services.env_server.skills.minedojo_api import MineDojoAgent  # optional backend
        return MineDojoAgent(actions)
    return AGENT_CLASSES[backend](actions, recipes)


def _next(cell: Cell, step: Cell) -> Cell:
    return cell[0] + step[0], cell[1] + step[1]
