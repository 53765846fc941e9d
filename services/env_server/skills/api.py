"""The `agent` object skills receive, and its documentation for prompts.

Runs inside the sandbox worker process next to untrusted code: pure Python, no imports beyond the
standard library, every attribute that skills must not reach starts with ``_`` (RestrictedPython
refuses such names at compile time), and every public value is a fresh copy of plain data.
"""

from __future__ import annotations

from collections import deque
from typing import Any

CRAFTER_SKILL_API = '''\
A skill is a Python generator function that takes `agent` and yields Crafter action names, one per
game step. It stops when it returns. No imports, no files, no dunder names; loops are budgeted.

    def skill(agent):
        while agent.inventory["wood"] < 2:
            action = agent.step_to("tree")      # walk next to the nearest seen tree and face it
            if action is None:                  # already facing a tree
                action = "do"                   # "do" collects / attacks / interacts with the faced cell
            yield action

Actions: noop, move_left, move_right, move_up, move_down, do, sleep, place_stone, place_table,
place_furnace, place_plant, make_wood_pickaxe, make_stone_pickaxe, make_iron_pickaxe,
make_wood_sword, make_stone_sword, make_iron_sword. Moving toward a blocked cell only turns the
player to face it. "do" on tree gives wood; on stone/coal needs a wood_pickaxe, iron needs a
stone_pickaxe, diamond an iron_pickaxe; on water drinks; on a cow (hit repeatedly) eats.
place_table needs wood (and a free faced cell); make_* needs a table nearby (iron tools also a
furnace); place_furnace needs stone and a table nearby.

Coordinates are (x, y); x grows to the right, y grows downward ("move_up" is y - 1).
agent.position         -> (x, y) of the player
agent.facing           -> (dx, dy) direction the player faces, e.g. (0, 1) is down
agent.inventory        -> dict item -> count: sapling, wood, stone, coal, iron, diamond,
                          wood_pickaxe, stone_pickaxe, iron_pickaxe, wood_sword, stone_sword, iron_sword
agent.health, agent.food, agent.drink, agent.energy -> 0..9
agent.sleeping, agent.daylight -> bool, 0.0 (night) .. 1.0 (day)
agent.view             -> 7 rows x 9 columns of names around the player (player at row 3, column 4).
                          Names: water grass stone path sand tree lava coal iron diamond table
                          furnace, and creatures/objects cow zombie skeleton arrow plant player
agent.facing_cell()    -> name of the cell the player faces
agent.sees(name)       -> True if `name` is in the current view
agent.at(x, y)         -> name last seen at (x, y), or None if never seen (the memory of the map)
agent.nearest(name)    -> (x, y) of the nearest cell ever seen holding `name`, or None
agent.step_to(name)    -> next move action to stand next to the nearest seen `name` and face it;
                          None when already facing it; a move that explores when none is seen or reachable
agent.path_to(x, y)    -> list of move actions that end facing cell (x, y), or None if no known path
agent.face(direction)  -> the action that faces "left", "right", "up" or "down"
agent.explore()        -> a move action toward the nearest unseen area
agent.steps            -> frames this skill has run so far
'''

_MOVES = {(-1, 0): "move_left", (1, 0): "move_right", (0, -1): "move_up", (0, 1): "move_down"}
_DIRECTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
_WALKABLE = frozenset({"grass", "sand", "path"})
_MOVING = frozenset({"cow", "zombie", "skeleton", "arrow"})  # creatures move: remembered cells stay walkable
_BFS_LIMIT = 4096


class CrafterAgent:
    """Perception of one Crafter player, refreshed by the worker before every resume of the skill."""

    def __init__(self, actions: list[str]):
        self._actions = tuple(actions)
        self._memory: dict[tuple[int, int], str] = {}
        self._state: dict[str, Any] = {}
        self._steps = 0

    def _update(self, perception: dict[str, Any], steps: int) -> None:
        self._state = perception
        self._steps = steps
        x0, y0 = perception["view_origin"]
        for dy, row in enumerate(perception["view"]):
            for dx, name in enumerate(row):
                if name != "unknown":
                    self._memory[(x0 + dx, y0 + dy)] = name

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
    def view(self) -> list[list[str]]:
        return [list(row) for row in self._state["view"]]

    @property
    def steps(self) -> int:
        return self._steps

    # --- helpers ----------------------------------------------------------------------------------
    def facing_cell(self) -> str | None:
        (x, y), (dx, dy) = self.position, self.facing
        return self._memory.get((x + dx, y + dy))

    def sees(self, name: str) -> bool:
        return any(name in row for row in self._state["view"])

    def at(self, x: int, y: int) -> str | None:
        return self._memory.get((int(x), int(y)))

    def nearest(self, name: str) -> tuple[int, int] | None:
        px, py = self.position
        best, best_distance = None, None
        for (x, y), seen in self._memory.items():
            if seen == name:
                distance = abs(x - px) + abs(y - py)
                if best_distance is None or distance < best_distance:
                    best, best_distance = (x, y), distance
        return best

    def face(self, direction: str) -> str:
        if direction not in _DIRECTIONS:
            raise ValueError(f"direction must be one of {sorted(_DIRECTIONS)}, got {direction!r}")
        return _MOVES[_DIRECTIONS[direction]]

    def _walkable(self, cell: tuple[int, int]) -> bool:
        name = self._memory.get(cell)
        if name in _WALKABLE:
            return True
        if name in _MOVING:  # a creature in view blocks the cell; one remembered elsewhere has moved on
            x0, y0 = self._state["view_origin"]
            in_view = 0 <= cell[0] - x0 < 9 and 0 <= cell[1] - y0 < 7
            return not in_view
        return False

    def path_to(self, x: int, y: int) -> list[str] | None:
        """Moves that end next to (x, y) and facing it (breadth-first over remembered walkable cells)."""
        target = (int(x), int(y))
        start = self.position
        goals = {(target[0] - dx, target[1] - dy): (dx, dy) for dx, dy in _MOVES}
        previous: dict[tuple[int, int], tuple[tuple[int, int], tuple[int, int]] | None] = {start: None}
        queue = deque([start])
        while queue and len(previous) < _BFS_LIMIT:
            cell = queue.popleft()
            if cell in goals:
                moves = [_MOVES[goals[cell]]] if (cell != start or self.facing != goals[cell]) else []
                while previous[cell] is not None:
                    parent, step = previous[cell]
                    moves.append(_MOVES[step])
                    cell = parent
                moves.reverse()
                return moves
            for dx, dy in _MOVES:
                nxt = (cell[0] + dx, cell[1] + dy)
                if nxt not in previous and self._walkable(nxt):
                    previous[nxt] = (cell, (dx, dy))
                    queue.append(nxt)
        return None

    def step_to(self, name: str) -> str | None:
        (px, py), (fx, fy) = self.position, self.facing
        if self._memory.get((px + fx, py + fy)) == name:
            return None
        candidates = sorted((abs(x - px) + abs(y - py), (x, y)) for (x, y), seen in self._memory.items()
                            if seen == name)
        for _distance, (x, y) in candidates[:8]:
            path = self.path_to(x, y)
            if path:
                return path[0]
        return self.explore()

    def explore(self) -> str:
        """A move toward the nearest remembered walkable cell that borders unseen cells."""
        start = self.position
        previous: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
        first_move: dict[tuple[int, int], tuple[int, int]] = {}
        queue = deque([start])
        while queue and len(previous) < _BFS_LIMIT:
            cell = queue.popleft()
            if cell != start and any((cell[0] + dx, cell[1] + dy) not in self._memory for dx, dy in _MOVES):
                return _MOVES[first_move[cell]]
            for dx, dy in _MOVES:
                nxt = (cell[0] + dx, cell[1] + dy)
                if nxt not in previous and self._walkable(nxt):
                    previous[nxt] = cell
                    first_move[nxt] = first_move.get(cell, (dx, dy))
                    queue.append(nxt)
        # Nothing reachable is unexplored: turn, cycling through directions so the view changes.
        return list(_MOVES.values())[self._steps % 4]


AGENT_CLASSES: dict[str, type] = {"crafter": CrafterAgent}


def make_agent(backend: str, actions: list[str]) -> Any:
    """The agent object for a backend's skills."""
    if backend == "minedojo":
        from services.env_server.skills.minedojo_api import MineDojoAgent  # optional backend
        return MineDojoAgent(actions)
    return AGENT_CLASSES[backend](actions)
