"""The `agent` object skills receive, and its documentation for prompts.

Runs inside the sandbox worker process next to untrusted code: pure Python, no imports beyond the
standard library, every attribute that skills must not reach starts with ``_`` (RestrictedPython
refuses such names at compile time), and every public value is a fresh copy of plain data.
"""

from __future__ import annotations

import textwrap
from typing import Any

from services.env_server.skills.navigation import (
    CREATURES,
    MOVES,
    STEPS,
    WALKABLE,
    Cell,
    MapMemory,
    adjacent,
)
from services.env_server.skills.recipes import Recipes

# Name -> one-line truthful description of every public agent attribute, in the order to show. The skill
# API text renders it (render_agent_doc); a test checks it names exactly CrafterAgent's public attributes.
AGENT_API_DOC: dict[str, str] = {
    "agent.position": "(x, y) of the player. The world is 64 x 64 cells: x is the column 0..63 and grows to the "
                      "right, y is the row 0..63 and grows downward (move_up is y - 1); episodes start at (32, 32)",
    "agent.facing": "(dx, dy) the player faces: (-1, 0) left, (1, 0) right, (0, -1) up, (0, 1) down",
    "agent.inventory": "dict item -> count of every item the game has (the items of the rules below; status "
                       "values are separate)",
    "agent.health, agent.food, agent.drink, agent.energy": "0..9 each",
    "agent.sleeping, agent.daylight": "bool; 0.0 (night) .. 1.0 (day)",
    "agent.achievements": "sorted list of the achievements unlocked so far this episode, as names "
                          "(see the rules below)",
    "agent.view": "7 rows x 9 columns of cell names around the player, view[row][column]; the player is at "
                  "view[3][4], so view[3 + dy][4 + dx] is the cell (x + dx, y + dy). Names: the materials of the "
                  "rules below, creatures and objects cow zombie skeleton arrow plant fence player, and out_of_map "
                  "for cells beyond the map edge",
    "agent.facing_cell()": "name of the cell the player faces now, from the current view (out_of_map at the edge)",
    "agent.look(direction)": "name of the cell next to the player in direction 'left', 'right', 'up' or 'down', "
                             "from the current view",
    "agent.is_free(direction)": "True if that neighbouring cell is grass, sand or path with no creature or object "
                                "on it, i.e. a move that way steps onto it (lava would too, and kills: never free)",
    "agent.face(direction)": "the move action toward direction: it turns the player that way and, when that cell "
                             "is free, also steps onto it; toward a blocked cell it only turns",
    "agent.sees(name)": "True if name is in the current view",
    "agent.at(x, y)": "name last seen at (x, y) (the memory of the map, kept for this skill run); 'out_of_map' "
                      "outside 0..63; None if never seen",
    "agent.nearest(name)": "(x, y) of the remembered cell holding name with the fewest |dx| + |dy| (obstacles "
                           "ignored; ties: smaller y, then smaller x), or None",
    "agent.path_to(x, y)": "list of move actions over remembered free cells that ends next to (x, y) facing it "
                           "([] when already facing it; if (x, y) is itself free, the last move steps onto it), or "
                           "None when no path over seen cells is known",
    "agent.step_to(name)": "next move toward the remembered name with the shortest known path, ending next to it "
                           "and facing it; None when already facing one. It keeps that target until it is reached, "
                           "gone or clearly farther than another; a creature in the only way is bumped (which only "
                           "turns: it waits) rather than given up on. When no name is remembered or reachable it "
                           "returns explore()",
    "agent.explore()": "a move toward the nearest reachable free cell that borders cells never seen inside the map; "
                       "it keeps that goal until the area is seen. Walled in, it digs its way out: it faces and "
                       "returns 'do' on cells that 'do' turns into free ground with the tools held (e.g. stone "
                       "with a wood_pickaxe); 'noop' when nothing reachable is left unseen",
    "agent.needs(name)": "what making, placing or collecting name needs, from the world's rules: a dict "
                         "{'action', 'uses', 'holds', 'nearby', 'faced', 'gives'} (item -> count "
                         "dicts, name lists); name is an item, an action or an achievement; None when no rule "
                         "covers it",
    "agent.missing(name)": "list of what stops name from working here and now, in words (items short, no table "
                           "nearby, facing the wrong cell); [] when it would work",
    "agent.can(name)": "True when name (an action, an item or an achievement) would work here and now",
    "agent.steps": "frames this skill has run so far",
    "agent.actions": "tuple of every action name",
}


CRAFTER_SKILL_API = '''\
A skill is a Python generator function that takes `agent` and yields Crafter action names, one per
game step (each yield is one frame). It stops when it returns.

    def skill(agent):
        # Walk next to the nearest sand cell and face it, exploring until one has been seen.
        while True:
            action = agent.step_to("sand")   # a move; explores while no sand has been seen
            if action is None:               # next to a sand cell, facing it
                return
            yield action

The `agent` object:
'''


def render_agent_doc(doc: dict[str, str], width: int = 104) -> str:
    """AGENT_API_DOC as prompt text: one "name -> description" entry per attribute, wrapped."""
    lines = []
    for name, text in doc.items():
        lines.append(textwrap.fill(f"{name} -> {text}", width, subsequent_indent="    "))
    return "\n".join(lines) + "\n"


CRAFTER_SKILL_API += render_agent_doc(AGENT_API_DOC)

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
