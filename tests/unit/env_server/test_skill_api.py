"""The `agent` object skills see: hand-made grids for exact behaviour, real Crafter worlds for the rest."""

import itertools
import re

import pytest
from crafter import constants

from services.env_server.backends.crafter import CrafterBackend
from services.env_server.backends.crafter_rules import crafter_rules
from services.env_server.skills.api import CrafterAgent
from services.env_server.skills.api_doc import AGENT_API_DOC, CRAFTER_SKILL_API
from services.env_server.skills.recipes import Recipes, compact_rules

WORKER_RULES = Recipes(compact_rules(crafter_rules()))  # what a sandbox worker gets from the server

ACTIONS = ["noop", "move_left", "move_right", "move_up", "move_down", "do"]
NAMES = {"g": "grass", "t": "tree", "w": "water", "s": "stone", "p": "player", "?": "unknown", "c": "cow",
         "#": "out_of_map"}
MOVES = {"move_left": (-1, 0), "move_right": (1, 0), "move_up": (0, -1), "move_down": (0, 1)}


def perception(rows: list[str], position=(4, 3), facing=(0, 1), origin=(0, 0), **extra) -> dict:
    return {"position": list(position), "facing": list(facing), "view": [[NAMES[c] for c in row] for row in rows],
            "view_origin": list(origin), "inventory": {"wood": 1}, "sleeping": False, "daylight": 1.0,
            "status": {"health": 9, "food": 8, "drink": 7, "energy": 6}, **extra}


class Grid:
    """A tiny world of named cells that moves the player as Crafter does: onto free cells, else only turning."""

    def __init__(self, rows: list[str], position: tuple[int, int], facing=(0, 1), area=None):
        self.cells = {(x, y): NAMES[c] for y, row in enumerate(rows) for x, c in enumerate(row)}
        self.width, self.height = len(rows[0]), len(rows)
        self.position, self.facing = position, facing
        self.area = area or (self.width, self.height)

    def name(self, cell) -> str:
        inside = 0 <= cell[0] < self.area[0] and 0 <= cell[1] < self.area[1]
        return self.cells.get(cell, "grass") if inside else "out_of_map"

    def perceive(self, **extra) -> dict:
        x0, y0 = self.position[0] - 4, self.position[1] - 3
        view = [["player" if (x0 + dx, y0 + dy) == self.position else self.name((x0 + dx, y0 + dy))
                 for dx in range(9)] for dy in range(7)]
        return {"position": list(self.position), "facing": list(self.facing), "view": view,
                "view_origin": [x0, y0], "inventory": {}, "sleeping": False, "daylight": 1.0,
                "status": {"health": 9, "food": 9, "drink": 9, "energy": 9}, "area": list(self.area), **extra}

    def act(self, action: str) -> None:
        if action in MOVES:
            self.facing = MOVES[action]
            target = (self.position[0] + self.facing[0], self.position[1] + self.facing[1])
            if self.name(target) in ("grass", "sand", "path"):
                self.position = target


WORLD = [
    "ggggggggg",
    "ggggggggt",
    "gwwwggggg",
    "gggwpgggg",
    "ggggggggg",
    "ggggggggg",
    "sgggggggg",
]


def test_plain_perception() -> None:
    agent = CrafterAgent(ACTIONS)
    agent._update(perception(WORLD, achievements=["place_table", "collect_wood"]), steps=3)
    assert agent.position == (4, 3) and agent.facing == (0, 1)
    assert agent.inventory == {"wood": 1} and agent.food == 8 and agent.steps == 3
    assert agent.facing_cell() == "grass" and agent.sees("tree") and not agent.sees("diamond")
    assert agent.at(8, 1) == "tree" and agent.at(20, 20) is None
    assert agent.at(99, 99) == "out_of_map" and agent.at(-1, 3) == "out_of_map"  # the map is 64 x 64
    assert agent.achievements == ["collect_wood", "place_table"]
    agent.inventory["wood"] = 99  # a copy: the skill cannot change the agent's state
    agent.achievements.append("x")
    assert agent.inventory == {"wood": 1} and agent.achievements == ["collect_wood", "place_table"]


def test_look_is_free_and_face_read_the_current_view() -> None:
    agent = CrafterAgent(ACTIONS)
    agent._update(perception(WORLD), steps=0)
    assert agent.look("left") == "water" and not agent.is_free("left")
    assert agent.look("right") == "grass" and agent.is_free("right")
    assert agent.face("left") == "move_left"
    with pytest.raises(ValueError, match="direction"):
        agent.look("north")


def test_nearest_and_path_to_avoid_water() -> None:
    agent = CrafterAgent(ACTIONS)
    agent._update(perception(WORLD), steps=0)
    assert agent.nearest("tree") == (8, 1)
    path = agent.path_to(8, 1)
    x, y = 4, 3
    for move in path:  # every move steps onto grass, and a move also turns the player its way
        x, y = x + MOVES[move][0], y + MOVES[move][1]
        assert agent.at(x, y) == "grass"
    dx, dy = MOVES[path[-1]]
    assert (x + dx, y + dy) == (8, 1) and len(path) == 5  # the shortest way ends facing the tree: no extra turn
    assert agent.step_to("tree") == path[0]


def test_nearest_breaks_ties_by_row_then_column() -> None:
    rows = ["ggggggggg", "ggggggggg", "ggggggggg", "gtggpggtg", "ggggggggg", "ggggggggg", "ggggggggg"]
    agent = CrafterAgent(ACTIONS)
    agent._update(perception(rows), steps=0)
    assert agent.nearest("tree") == (1, 3)  # (1, 3) and (7, 3) are both 3 away: smaller x wins on the same row


def test_step_to_returns_none_when_facing_and_explores_when_unseen() -> None:
    rows = list(WORLD)
    rows[4] = "ggggtgggg"  # a tree right below the player, who faces down
    agent = CrafterAgent(ACTIONS)
    agent._update(perception(rows), steps=0)
    assert agent.step_to("tree") is None
    assert agent.step_to("diamond") in ("move_left", "move_right", "move_up", "move_down")


def test_memory_accumulates_across_views() -> None:
    agent = CrafterAgent(ACTIONS)
    agent._update(perception(WORLD), steps=0)
    shifted = ["ggggggggg"] * 7
    agent._update(perception(shifted, position=(14, 3), origin=(10, 0)), steps=1)
    assert agent.at(8, 1) == "tree" and agent.nearest("stone") == (0, 6)


def drive(grid: Grid, agent: CrafterAgent, decide, frames: int) -> list[str]:
    actions = []
    for k in range(frames):
        agent._update(grid.perceive(), k)
        action = decide(agent)
        if action is None:
            break
        actions.append(action)
        grid.act(action)
    return actions


OPPOSITE = {"move_left": "move_right", "move_right": "move_left", "move_up": "move_down", "move_down": "move_up"}


def reversals(actions: list[str]) -> int:
    """How often a move undoes the previous one (left then right, up then down)."""
    return sum(1 for a, b in itertools.pairwise(actions) if OPPOSITE.get(a) == b)


def longest_swing(actions: list[str]) -> int:
    """The longest stretch of moves that each undo the previous one (left, right, left, ...)."""
    best = current = 0
    for a, b in itertools.pairwise(actions):
        current = current + 1 if OPPOSITE.get(a) == b else 0
        best = max(best, current)
    return best


def test_step_to_commits_to_one_of_two_equally_near_targets() -> None:
    rows = ["g" * 9 for _ in range(7)]
    rows[3] = "tgggggggt"  # trees at (0, 3) and (8, 3), both 4 from the player at (4, 3)
    grid = Grid(rows, (4, 3), area=(9, 7))
    agent = CrafterAgent(ACTIONS)
    actions = drive(grid, agent, lambda a: a.step_to("tree"), 20)
    assert grid.name((grid.position[0] + grid.facing[0], grid.position[1] + grid.facing[1])) == "tree"
    assert actions == ["move_left"] * 3  # three steps the same way, the last one ends facing the tree


def test_step_to_waits_for_a_creature_instead_of_switching_targets() -> None:
    rows = ["gwggggggg"] * 7  # a column of water at x = 1 ...
    rows[3] = "tgggggggt"  # ... with one gap at (1, 3); trees at (0, 3) and (8, 3)
    grid = Grid(rows, (3, 3), area=(9, 7))
    agent = CrafterAgent(ACTIONS)
    agent._update(grid.perceive(), 0)
    assert agent.step_to("tree") == "move_left"  # the left tree is 3 away, the right one 5
    grid.act("move_left")
    grid.cells[(1, 3)] = "cow"  # a cow steps into the gap: the left tree is now out of reach for a while
    agent._update(grid.perceive(), 1)
    assert agent.step_to("tree") == "move_left"  # bumps (waits at) the cow rather than swinging right
    grid.cells[(1, 3)] = "water"  # the gap is gone for good: now the other tree is the target
    agent._update(grid.perceive(), 2)
    assert agent.step_to("tree") == "move_right"


def test_explore_at_the_map_edge_moves_away_from_it() -> None:
    rows = ["g" * 30 for _ in range(30)]
    grid = Grid(rows, (0, 15), area=(30, 30))
    agent = CrafterAgent(ACTIONS)
    actions = drive(grid, agent, lambda a: a.explore(), 200)
    assert reversals(actions) <= 2
    assert sum(1 for a in actions if a == "move_left") <= 30
    assert agent.at(-1, 15) == "out_of_map" and agent.at(29, 29) is not None  # the whole map got seen
    assert actions[-1] == "noop"  # nothing left to see


def test_explore_digs_out_when_walled_in_and_waits_when_it_cannot() -> None:
    rows = ["t" * 13] * 4 + ["tttttggtttttt"] + ["t" * 13] * 4 + ["g" * 13] * 6
    grid = Grid(rows, (5, 4), facing=(1, 0), area=(13, 15))
    agent = CrafterAgent(ACTIONS)
    agent._update(grid.perceive(), 0)
    assert agent.explore() == "noop"  # walled in by trees and nothing to dig with (no rules given)
    agent._recipes = Recipes({"diggable": {"tree": {}}})  # the rules a worker would get from the server
    agent._update(grid.perceive(), 1)
    turn = agent.explore()
    assert turn in ("move_up", "move_down")  # the nearest unseen rows are 3 up and 3 down
    grid.act(turn)  # a tree there: the move only turns the player
    assert grid.position == (5, 4)
    agent._update(grid.perceive(), 2)
    assert agent.explore() == "do"  # facing the tree on the way out: dig it
    agent._recipes = Recipes({"diggable": {"stone": {"wood_pickaxe": 1}}})
    agent._update(grid.perceive(), 3)
    assert agent.explore() == "noop"  # stone needs a pickaxe the player does not hold, and trees are not listed


def test_a_walled_in_player_notices_when_a_wall_opens() -> None:
    rows = ["w" * 13] * 4 + ["wwwwwggwwwwww"] + ["w" * 13] * 4 + ["g" * 13] * 6
    grid = Grid(rows, (5, 4), area=(13, 15))
    agent = CrafterAgent(ACTIONS)
    for step in range(3):  # the failed search is remembered: later frames answer without searching again
        agent._update(grid.perceive(), step)
        assert agent.explore() == "noop" and agent.step_to("diamond") == "noop"
    grid.cells[(6, 5)] = grid.cells[(6, 6)] = grid.cells[(6, 7)] = "sand"  # a way out toward the unseen rows
    agent._update(grid.perceive(), 3)
    assert agent.explore() == "move_right"


def test_every_public_agent_name_is_documented() -> None:
    public = {n for n in dir(CrafterAgent) if not n.startswith("_")}
    documented = {name for key in AGENT_API_DOC for name in re.findall(r"agent\.(\w+)", key)}
    assert public == documented
    assert all(value and "\n" not in value for value in AGENT_API_DOC.values())
    assert "out_of_map" in CRAFTER_SKILL_API and "agent.achievements" in CRAFTER_SKILL_API


# --- real Crafter worlds ------------------------------------------------------------------------------
def test_step_to_finds_a_far_table_from_the_map_edge() -> None:
    """Seed 2: the player stands on the left map edge, a table is 55 columns away across the map."""
    env = CrafterBackend().make_env()
    env.reset(2)
    world = env._env._world
    world[(55, 23)] = "table"
    world.move(env._player, (0, 23))
    agent = CrafterAgent(list(constants.actions), WORKER_RULES)
    actions: list[str] = []
    for k in range(1200):
        agent._update(env.perception(), k)
        if agent.facing_cell() == "table":
            break
        action = agent.step_to("table") or "do"
        actions.append(action)
        for need in ("health", "food", "drink", "energy"):  # test hook: this test is about finding the way
            env._player.inventory[need] = max(env._player.inventory[need], 5)
        env.step(constants.actions.index(action))
    # The agent before out_of_map swung left/right at the edge for the whole budget (478 reversals in a row).
    assert agent.facing_cell() == "table", f"not found in {len(actions)} frames"
    assert reversals(actions) <= len(actions) // 25 and longest_swing(actions) <= 3


def test_explore_from_the_map_edge_leaves_it() -> None:
    env = CrafterBackend().make_env()
    env.reset(0)
    env._env._world.move(env._player, (0, 33))
    agent = CrafterAgent(list(constants.actions), WORKER_RULES)
    positions, actions = [], []
    for k in range(100):
        agent._update(env.perception(), k)
        positions.append(agent.position)
        actions.append(agent.explore())
        env.step(constants.actions.index(actions[-1]))
    # The agent before out_of_map never left x = 0 here: 96 left/right reversals in a row.
    assert max(x for x, _ in positions) >= 5 and longest_swing(actions) <= 3
    assert sum(1 for x, _ in positions if x == 0) <= 30  # it follows the edge at most a while, then leaves
