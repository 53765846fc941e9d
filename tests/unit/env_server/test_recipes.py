"""The agent's recipe helpers answer from the world's rules, in the agent and through a real sandbox worker."""

from __future__ import annotations

from services.env_server.backends.crafter import CrafterBackend, CrafterEnv
from services.env_server.backends.crafter_rules import crafter_rules
from services.env_server.skills.api import CrafterAgent
from services.env_server.skills.recipes import Recipes, compact_rules


def _agent(env: CrafterEnv) -> CrafterAgent:
    agent = CrafterAgent(list(CrafterBackend.spec.actions), Recipes(compact_rules(crafter_rules())))
    agent._update(env.perception(), 0)
    return agent


def test_needs_reads_the_rules() -> None:
    env = CrafterEnv()
    env.reset(5)
    agent = _agent(env)
    assert agent.needs("table")["uses"] == {"wood": 2}
    assert agent.needs("place_furnace")["uses"] == {"stone": 4}
    assert agent.needs("collect_iron")["holds"] == {"stone_pickaxe": 1}
    assert agent.needs("make_wood_pickaxe")["nearby"] == ["table"]
    assert agent.needs("eat_cow") is None  # no rule of the game's data covers it
    # What explore() may dig through, from the collect rules: stone with a wood_pickaxe, trees with nothing.
    assert compact_rules(crafter_rules())["diggable"] == {"tree": {}, "stone": {"wood_pickaxe": 1},
                                                          "coal": {"wood_pickaxe": 1},
                                                          "iron": {"stone_pickaxe": 1},
                                                          "diamond": {"iron_pickaxe": 1}}


def test_missing_says_what_stops_an_action_here_and_now() -> None:
    env = CrafterEnv()
    env.reset(5)
    agent = _agent(env)
    gaps = agent.missing("make_wood_pickaxe")
    assert any("1 more wood" in g for g in gaps) and any("table" in g for g in gaps)
    assert not agent.can("make_wood_pickaxe")
    px, py = (int(v) for v in env._player.pos)
    world = env._env._world
    world[(px + 1, py + 1)] = "table"  # diagonal neighbour: inside the nearby square
    env._player.inventory["wood"] = 1
    agent._update(env.perception(), 1)
    assert agent.missing("make_wood_pickaxe") == []
    assert agent.can("wood_pickaxe")


