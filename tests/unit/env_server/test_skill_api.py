"""The `agent` object skills see, on hand-made perceptions."""

from services.env_server.skills.api import CrafterAgent

ACTIONS = ["noop", "move_left", "move_right", "move_up", "move_down", "do"]


def perception(rows: list[str], position=(4, 3), facing=(0, 1), origin=(0, 0)) -> dict:
    names = {"g": "grass", "t": "tree", "w": "water", "s": "stone", "p": "player", "?": "unknown"}
    return {"position": list(position), "facing": list(facing), "view": [[names[c] for c in row] for row in rows],
            "view_origin": list(origin), "inventory": {"wood": 1}, "sleeping": False, "daylight": 1.0,
            "status": {"health": 9, "food": 8, "drink": 7, "energy": 6}}


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
    agent._update(perception(WORLD), steps=3)
    assert agent.position == (4, 3) and agent.facing == (0, 1)
    assert agent.inventory == {"wood": 1} and agent.food == 8 and agent.steps == 3
    assert agent.facing_cell() == "grass" and agent.sees("tree") and not agent.sees("diamond")
    assert agent.at(8, 1) == "tree" and agent.at(99, 99) is None
    agent.inventory["wood"] = 99  # a copy: the skill cannot change the agent's state
    assert agent.inventory == {"wood": 1}


def test_nearest_and_path_to_avoid_water() -> None:
    agent = CrafterAgent(ACTIONS)
    agent._update(perception(WORLD), steps=0)
    assert agent.nearest("tree") == (8, 1)
    path = agent.path_to(8, 1)
    x, y = 4, 3
    moves = {"move_left": (-1, 0), "move_right": (1, 0), "move_up": (0, -1), "move_down": (0, 1)}
    for move in path[:-1]:
        x, y = x + moves[move][0], y + moves[move][1]
        assert agent.at(x, y) == "grass"
    dx, dy = moves[path[-1]]
    assert (x + dx, y + dy) == (8, 1)  # the last move faces the tree
    assert agent.step_to("tree") == path[0]


def test_step_to_returns_none_when_facing_and_explores_when_unseen() -> None:
    rows = [r for r in WORLD]
    rows[4] = "ggggtgggg"  # a tree right below the player, who faces down
    agent = CrafterAgent(ACTIONS)
    agent._update(perception(rows), steps=0)
    assert agent.step_to("tree") is None
    assert agent.step_to("diamond") in ("move_left", "move_right", "move_up", "move_down")
    assert agent.face("left") == "move_left"


def test_memory_accumulates_across_views() -> None:
    agent = CrafterAgent(ACTIONS)
    agent._update(perception(WORLD), steps=0)
    shifted = ["ggggggggg"] * 7
    agent._update(perception(shifted, position=(14, 3), origin=(10, 0)), steps=1)
    assert agent.at(8, 1) == "tree" and agent.nearest("stone") == (0, 6)


def test_minedojo_agent_exposes_documented_fields_as_copies() -> None:
    from services.env_server.skills.api import make_agent

    agent = make_agent("minedojo", ["noop", "attack"])
    agent._update({"position": [1.0, 64.0, 2.0], "inventory": {"log": 2}, "life": 20.0}, steps=4)
    assert agent.position == [1.0, 64.0, 2.0] and agent.life == 20.0 and agent.steps == 4
    agent.inventory["log"] = 99
    assert agent.inventory == {"log": 2}
    import pytest

    with pytest.raises(AttributeError, match="skill API"):
        _ = agent.teleport
