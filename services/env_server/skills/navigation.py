"""The remembered map and breadth-first routes over it, for the skill `agent` object (skills/api.py).

Runs inside the sandbox worker next to untrusted code: pure Python, standard library only. Skills
never see this module; they reach it only through the agent's public methods.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

Cell = tuple[int, int]
# Neighbour order is fixed, so equal-distance ties always resolve the same way.
STEPS: tuple[Cell, ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))
MOVES = {(-1, 0): "move_left", (1, 0): "move_right", (0, -1): "move_up", (0, 1): "move_down"}
SEARCH_LIMIT = 4096  # cells; the Crafter map has 64 x 64
WALKABLE = frozenset({"grass", "sand", "path"})
CREATURES = frozenset({"cow", "zombie", "skeleton"})  # they walk only on walkable cells, and move on
OUT_OF_MAP = "out_of_map"
COMMIT_SLACK = 4  # steps a committed goal may be farther than the nearest before a route switches


class Search:
    """Breadth-first search from ``start`` over cells ``passable`` accepts; visits cells nearest first."""

    def __init__(self, start: Cell, passable: Callable[[Cell], bool], first: Cell | None = None,
                 limit: int = SEARCH_LIMIT):
        self.start = start
        self.parent: dict[Cell, Cell | None] = {start: None}
        self.distance: dict[Cell, int] = {start: 0}
        self._passable = passable
        self._limit = limit
        # Expanding ``first`` (the way the player faces) first breaks ties toward going straight on.
        self._steps = STEPS if first not in STEPS else (first, *(s for s in STEPS if s != first))

    def visit(self) -> Iterator[Cell]:
        """Cells in order of path length (the start first)."""
        queue = deque([self.start])
        parent, distance, passable, steps = self.parent, self.distance, self._passable, self._steps
        while queue:
            cell = queue.popleft()
            yield cell
            x, y = cell
            for dx, dy in steps:
                nxt = (x + dx, y + dy)
                if nxt not in parent and len(parent) < self._limit and passable(nxt):
                    parent[nxt] = cell
                    distance[nxt] = distance[cell] + 1
                    queue.append(nxt)

    def steps_to(self, cell: Cell) -> list[Cell]:
        """Unit steps (dx, dy) from the start to a visited ``cell``."""
        steps: list[Cell] = []
        parent = self.parent[cell]
        while parent is not None:
            steps.append((cell[0] - parent[0], cell[1] - parent[1]))
            cell, parent = parent, self.parent[parent]
        steps.reverse()
        return steps


def find(search: Search, is_goal: Callable[[Cell], bool], preferred: Callable[[Cell], bool] | None = None,
         slack: int = 0) -> tuple[Cell, list[Cell]] | None:
    """The nearest goal cell and the steps to it, or None when no goal is reachable.

    With ``preferred``, a preferred goal (one the caller committed to) wins over a nearer goal when it
    is at most ``slack`` steps farther (and at most twice as far), so the caller does not switch goals
    over a tie but still takes a goal right next to it.
    """
    nearest: Cell | None = None
    for cell in search.visit():
        if nearest is not None:
            near = search.distance[nearest]
            if search.distance[cell] > near + min(slack, near):
                break
        if not is_goal(cell):
            continue
        if preferred is None or preferred(cell):
            return cell, search.steps_to(cell)
        if nearest is None:
            nearest = cell
    return None if nearest is None else (nearest, search.steps_to(nearest))


class MapMemory:
    """Every cell seen during one skill run, what blocks movement, and where unseen cells begin."""

    def __init__(self) -> None:
        self.names: dict[Cell, str] = {}
        self.where: dict[str, set[Cell]] = {}  # name -> cells remembered holding it
        self.frontier: set[Cell] = set()  # remembered cells next to a never-seen cell inside the map
        self.creatures_in_view: set[Cell] = set()
        self.area: Cell = (64, 64)
        self.version = 0  # bumps whenever what blocks movement changes (creatures moving aside)
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
                if name == "unknown":
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
                    self.version += 1
                else:
                    self.where[old].discard(cell)
                    if self._kind(cell, old) != self._kind(cell, name):
                        self.version += 1
                self.names[cell] = name
                self.where.setdefault(name, set()).add(cell)
        for cell in new:
            for dx, dy in ((0, 0), *STEPS):
                near = (cell[0] + dx, cell[1] + dy)
                unseen_next = any(self.name((near[0] + ex, near[1] + ey)) is None for ex, ey in STEPS)
                if near in self.names and self.inside(near) and unseen_next:
                    self.frontier.add(near)
                else:
                    self.frontier.discard(near)

    def _kind(self, cell: Cell, name: str) -> str:
        """What a name means for movement: creatures stand on free ground; an arrow flies over any."""
        if name in WALKABLE or name in CREATURES:
            return "free"
        if name == "arrow":
            return "free" if self._ground.get(cell) in WALKABLE else "arrow"
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
    def route(self, start: Cell, facing: Cell, is_goal: Callable[[Cell], bool],
              committed: Callable[[Cell], bool] | None = None, dig: Callable[[Cell], bool] | None = None,
              cache: object = None) -> tuple[Cell, list[Cell]] | None:
        """Steps to the nearest goal over free cells, else letting creatures count as passable (they move).

        A ``committed`` goal (chosen on an earlier frame) is kept over a nearer one unless it is clearly
        farther, also while a creature stands in its way: switching over ties, or over a creature that
        steps in and out of view, is what swings a player back and forth. With ``cache`` as a key, a
        search that reaches no goal is remembered until the map changes, so a player walled in does
        not pay for a full search every frame.
        """
        if cache is not None:
            dead_end = self._dead_ends.get(cache)
            if dead_end is not None and dead_end[0] == self.version and start in dead_end[1]:
                return None

        def passable(creatures_block: bool) -> Callable[[Cell], bool]:
            def ok(cell: Cell) -> bool:
                return self.free(cell, creatures_block) or (dig is not None and dig(cell))
            return ok

        found = search = None
        for creatures_block in (True, False) if self.creatures_in_view else (False,):
            search = Search(start, passable(creatures_block), facing)
            found = find(search, is_goal, committed, COMMIT_SLACK)
            if found is not None:
                break
        if committed is not None and (found is None or not committed(found[0])):
            kept = find(Search(start, passable(False), facing), lambda c: is_goal(c) and committed(c))
            if kept is not None and (found is None or len(kept[1]) <= len(found[1]) + min(COMMIT_SLACK,
                                                                                          len(found[1]))):
                found = kept
        if found is None and cache is not None and search is not None:
            self._dead_ends[cache] = (self.version, set(search.parent))
        return found


def adjacent(a: Cell, b: Cell) -> bool:
    return abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1
