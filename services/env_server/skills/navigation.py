"""The remembered map and breadth-first routes over it, for the skill `agent` object (skills/api.py).

Runs inside the sandbox worker next to untrusted code: pure Python, standard library only. Skills
never see this module; they reach it only through the agent's public methods.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

Cell = tuple[int, int]
# Neighbour order is fixed, so equal-distance ties always resolve the same way.
STEPS: tuple[Cell, ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))
MOVES = {(-1, 0): "move_left", (1, 0): "move_right", (0, -1): "move_up", (0, 1): "move_down"}
SEARCH_LIMIT = 4096  # cells; the Crafter map has 64 x 64
WALKABLE = frozenset({"grass", "sand", "path"})
CREATURES = frozenset({"cow", "zombie", "skeleton"})  # they walk only on walkable cells, and move on
UNSEEN = "unknown"  # a view cell with nothing known: never remembered (the backends write the view with these)
OUT_OF_MAP = "out_of_map"  # a view cell beyond the map edge (never a wrapped index)
COMMIT_SLACK = 4  # steps a committed goal may be farther than the nearest before a route switches


def find(start: Cell, passable: Callable[[Cell], bool], goals: set[Cell] | frozenset[Cell],
         preferred: set[Cell] | frozenset[Cell] = frozenset(), slack: int = 0, first: Cell | None = None,
         limit: int = SEARCH_LIMIT) -> tuple[tuple[Cell, list[Cell]] | None, dict[Cell, Cell | None]]:
    """Breadth-first search for the nearest goal: ((goal, unit steps to it) or None, the cells visited).

    A ``preferred`` goal (one the caller committed to) wins over a nearer goal when it is at most
    ``slack`` steps farther (and at most twice as far), so the caller does not switch goals over a tie
    but still takes a goal right next to it. Expanding ``first`` (the way the player faces) first
    breaks ties toward going straight on.
    """
    steps = STEPS if first not in STEPS else (first, *(s for s in STEPS if s != first))
    parent: dict[Cell, Cell | None] = {start: None}
    distance = {start: 0}
    queue = deque([start])
    nearest: Cell | None = None
    while queue:
        cell = queue.popleft()
        if nearest is not None and distance[cell] > distance[nearest] + min(slack, distance[nearest]):
            break
        if cell in goals:
            if not preferred or cell in preferred:
                return (cell, _steps_to(parent, cell)), parent
            if nearest is None:
                nearest = cell
        x, y = cell
        for dx, dy in steps:
            nxt = (x + dx, y + dy)
            if nxt not in parent and len(parent) < limit and passable(nxt):
                parent[nxt] = cell
                distance[nxt] = distance[cell] + 1
                queue.append(nxt)
    return (None if nearest is None else (nearest, _steps_to(parent, nearest))), parent


def _steps_to(parent: dict[Cell, Cell | None], cell: Cell) -> list[Cell]:
    steps: list[Cell] = []
    previous = parent[cell]
    while previous is not None:
        steps.append((cell[0] - previous[0], cell[1] - previous[1]))
        cell, previous = previous, parent[previous]
    steps.reverse()
    return steps


class MapMemory:
    """Every cell seen (the episode's map before the skill started, then its own run's views), what blocks
    movement, and where unseen cells begin."""

    def __init__(self) -> None:
        self.names: dict[Cell, str] = {}
        self.where: dict[str, set[Cell]] = {}  # name -> cells remembered holding it
        self.frontier: set[Cell] = set()  # remembered cells next to a never-seen cell inside the map
        self.creatures_in_view: set[Cell] = set()
        self.area: Cell = (64, 64)
        self.changed: list[Cell] = []  # cells whose meaning for movement changed (or got seen), in order
        self._ground: dict[Cell, str] = {}  # last non-creature name per cell: what an arrow flies over
        self._dead_ends: dict[object, tuple[int, set[Cell]]] = {}

    # --- learning ---------------------------------------------------------------------------------
    def update(self, view: list[list[str]], origin: Cell, area: Cell) -> None:
        self.area = area
        x0, y0 = origin
        self.creatures_in_view = set()
        new: list[Cell] = []
        for dy, row in enumerate(view):
            for dx, name in enumerate(row):
                if name == UNSEEN:
                    continue
                cell = (x0 + dx, y0 + dy)
                old = self.names.get(cell)
                if name in CREATURES or name == "arrow":
                    self.creatures_in_view.add(cell)
                else:
                    self._ground[cell] = name
                if old == name:
                    continue
                if old is None:
                    new.append(cell)
                    self.changed.append(cell)
                else:
                    self.where[old].discard(cell)
                    if self._kind(cell, old) != self._kind(cell, name):
                        self.changed.append(cell)
                self.names[cell] = name
                self.where.setdefault(name, set()).add(cell)
        # Each new cell and its neighbours once (a remembered map seeds thousands of cells at a time).
        for near in {(cell[0] + dx, cell[1] + dy) for cell in new for dx, dy in ((0, 0), *STEPS)}:
            unseen_next = any(self.name((near[0] + ex, near[1] + ey)) is None for ex, ey in STEPS)
            if near in self.names and self.inside(near) and unseen_next:
                self.frontier.add(near)
            else:
                self.frontier.discard(near)

    def _kind(self, cell: Cell, name: str) -> str:
        """What a name means for movement: creatures stand on free ground; an arrow flies over any."""
        if name in WALKABLE or name in CREATURES:
            return "free"
        if name == "arrow":  # an arrow flies over free ground, water or lava: what matters is below it
            ground = self._ground.get(cell, "arrow")
            return "free" if ground in WALKABLE else ground
        return name

    # --- reading ----------------------------------------------------------------------------------
    def inside(self, cell: Cell) -> bool:
        return 0 <= cell[0] < self.area[0] and 0 <= cell[1] < self.area[1]

    def name(self, cell: Cell) -> str | None:
        """The name last seen at ``cell``; OUT_OF_MAP beyond the map; None if never seen."""
        if not self.inside(cell):
            return OUT_OF_MAP
        return self.names.get(cell)

    def free(self, cell: Cell, creatures_block: bool = True) -> bool:
        name = self.names.get(cell)
        if name in WALKABLE:
            return True
        if name is None or self._kind(cell, name) != "free":
            return False
        # A creature in view blocks its cell; one remembered elsewhere has moved on.
        return not (creatures_block and cell in self.creatures_in_view)

    # --- routes -----------------------------------------------------------------------------------
    def passable(self, creatures_block: bool, dig: frozenset[str] = frozenset()) -> Callable[[Cell], bool]:
        """Whether a route may enter a cell: free ground, a creature's cell unless creatures block (only
        those in view do: one remembered elsewhere has moved on), or a cell of a ``dig`` name."""
        names, ground, in_view = self.names, self._ground, self.creatures_in_view

        def ok(cell: Cell) -> bool:
            name = names.get(cell)
            if name in WALKABLE:
                return True
            if name in CREATURES or (name == "arrow" and ground.get(cell) in WALKABLE):
                return not (creatures_block and cell in in_view)
            return name in dig
        return ok

    def route(self, start: Cell, facing: Cell, goals: set[Cell] | frozenset[Cell],
              committed: set[Cell] | frozenset[Cell] = frozenset(), dig: frozenset[str] = frozenset(),
              cache: object = None) -> tuple[Cell, list[Cell]] | None:
        """(goal, steps) to the nearest of ``goals`` around creatures in view, else through them (they move
        on: the move only bumps and waits), or None when no goal can be reached at all.

        A ``committed`` goal (chosen on an earlier frame) is kept over a nearer one unless it is clearly
        farther, also while a creature stands in its way: switching over ties, or over a creature that
        steps in and out of view, is what swings a player back and forth. With ``cache`` as a key, a
        search that reaches no goal is remembered until the map changes, so a player walled in does
        not pay for a full search every frame.
        """
        if cache is not None:
            dead_end = self._dead_ends.get(cache)
            if dead_end is not None and start in dead_end[1] and self._still_closed(cache, *dead_end):
                return None
        through, visited = find(start, self.passable(False, dig), goals, committed, COMMIT_SLACK, facing)
        if through is None:
            if cache is not None:
                self._dead_ends[cache] = (len(self.changed), set(visited))
            return None
        if not self.creatures_in_view:
            return through
        around, _ = find(start, self.passable(True, dig), goals, committed, COMMIT_SLACK, facing)
        if around is None:
            return through
        if committed and around[0] not in committed and through[0] in committed and \
                len(through[1]) <= len(around[1]) + min(COMMIT_SLACK, len(around[1])):
            return through
        return around


    def _still_closed(self, cache: object, seen: int, region: set[Cell]) -> bool:
        """Whether a region a search found no goal in is still closed: no cell in it or next to it has
        changed since (a goal or a way out can only appear there)."""
        for x, y in self.changed[seen:]:
            if any((x + dx, y + dy) in region for dx, dy in ((0, 0), *STEPS)):
                del self._dead_ends[cache]
                return False
        self._dead_ends[cache] = (len(self.changed), region)
        return True


def adjacent(a: Cell, b: Cell) -> bool:
    return abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1
