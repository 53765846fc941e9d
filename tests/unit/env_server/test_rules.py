"""The served world rules against the installed game itself: every amount the rules state is what the game does."""

from __future__ import annotations

import numpy as np
import pytest
from crafter import objects

from rlgpt import world_rules
from rlgpt.v1 import common_pb2
from services.env_server.backends import crafter_cycle
from services.env_server.backends.crafter import CrafterBackend, CrafterEnv
from services.env_server.backends.crafter_rules import crafter_rules

ACTIONS = list(CrafterBackend.spec.actions)


@pytest.fixture()
def env() -> CrafterEnv:
    env = CrafterEnv()
    env.reset(3)
    return env


def _clear_inventory(env: CrafterEnv) -> None:
    for item in env.inventory():
        env._player.inventory[item] = 0


def _faced(env: CrafterEnv) -> tuple[int, int]:
    player = env._player
    return int(player.pos[0] + player.facing[0]), int(player.pos[1] + player.facing[1])


def _set_cell(env: CrafterEnv, pos: tuple[int, int], material: str) -> None:
    world = env._env._world
    obj = world[pos][1]
    if obj is not None:
        world.remove(obj)
    world[pos] = material


def _clear_around(env: CrafterEnv, radius: int, material: str = "grass") -> None:
    """Grass (no table, no creature) within ``radius`` of the player, so only what a test places is nearby."""
    px, py = (int(v) for v in env._player.pos)
    for x in range(px - radius, px + radius + 1):
        for y in range(py - radius, py + radius + 1):
            if (x, y) != (px, py):
                _set_cell(env, (x, y), material)


def _do(env: CrafterEnv, action: str) -> None:
    env.step(ACTIONS.index(action))


def _place_rule(name: str) -> common_pb2.PlaceRule:
    return next(r for r in crafter_rules().place if r.item == name)


def _make_rule(name: str) -> common_pb2.MakeRule:
    return next(r for r in crafter_rules().make if r.item == name)


def test_rules_come_from_the_installed_game() -> None:
    rules = crafter_rules()
    assert rules.source.startswith("crafter ")
    assert {r.item for r in rules.place} == {"stone", "table", "furnace", "plant"}
    assert {r.action for r in rules.make} >= {"make_wood_pickaxe", "make_iron_sword"}
    # The installed data: a table uses 2 wood, a furnace 4 stone and needs nothing nearby.
    assert world_rules.achievement_rule(rules, "place_table").uses == {"wood": 2}
    assert world_rules.achievement_rule(rules, "place_furnace").uses == {"stone": 4}
    assert world_rules.achievement_rule(rules, "place_furnace").nearby == ()
    assert world_rules.tools_needed(rules, "collect_iron") == {"stone_pickaxe": 1}
    assert world_rules.achievement_items(rules, "make_wood_pickaxe") == {"wood_pickaxe": 1}
    assert world_rules.achievement_items(rules, "place_table") == {}
    assert rules.nearby_distance == 1
    # Every code fact was found in the installed game's code (none left out).
    assert len(rules.facts) >= 10, rules.facts
    assert "uses 2 wood" in rules.text and "probability 0.1" in rules.text


def test_table_needs_the_served_amount_of_wood(env: CrafterEnv) -> None:
    wood = _place_rule("table").uses[0].count
    _clear_around(env, 2)
    _clear_inventory(env)
    env._player.inventory["wood"] = wood - 1
    _do(env, "place_table")
    assert env._env._world[_faced(env)][0] != "table"
    assert "place_table" not in env.achievements()
    env._player.inventory["wood"] = wood
    _do(env, "place_table")
    assert env._env._world[_faced(env)][0] == "table"
    assert env.inventory()["wood"] == 0


def test_furnace_needs_the_served_stone_and_nothing_nearby(env: CrafterEnv) -> None:
    rule = _place_rule("furnace")
    assert not rule.nearby
    _clear_around(env, 3)
    _clear_inventory(env)
    env._player.inventory["stone"] = rule.uses[0].count - 1
    _do(env, "place_furnace")
    assert "place_furnace" not in env.achievements()
    env._player.inventory["stone"] = rule.uses[0].count
    _do(env, "place_furnace")
    assert "place_furnace" in env.achievements()


@pytest.mark.parametrize("offset_outside", [False, True])
def test_make_needs_a_table_within_the_nearby_distance(env: CrafterEnv, offset_outside: bool) -> None:
    rules = crafter_rules()
    rule = _make_rule("wood_pickaxe")
    assert list(rule.nearby) == ["table"]
    _clear_around(env, rules.nearby_distance + 2)
    _clear_inventory(env)
    for use in rule.uses:
        env._player.inventory[use.item] = use.count
    px, py = (int(v) for v in env._player.pos)
    distance = rules.nearby_distance + (1 if offset_outside else 0)
    _set_cell(env, (px + distance, py + distance), "table")  # diagonal: "nearby" is a square
    _do(env, "make_wood_pickaxe")
    made = env.inventory()["wood_pickaxe"]
    assert made == (0 if offset_outside else rule.gives)


def test_collect_rules_state_tools_and_what_the_cell_becomes(env: CrafterEnv) -> None:
    rule = next(r for r in crafter_rules().collect if r.material == "stone")
    tool = rule.requires[0].item
    _clear_inventory(env)
    _set_cell(env, _faced(env), "stone")
    _do(env, "do")
    assert env.inventory()["stone"] == 0
    env._player.inventory[tool] = 1
    _do(env, "do")
    assert env.inventory()["stone"] == rule.receives[0].count
    assert env._env._world[_faced(env)][0] == rule.leaves
    tree = next(r for r in crafter_rules().collect if r.material == "tree")
    _set_cell(env, _faced(env), "tree")
    _do(env, "do")
    assert env._env._world[_faced(env)][0] == tree.leaves


def test_sleep_only_starts_below_full_energy(env: CrafterEnv) -> None:
    assert any("only starts sleeping when energy is below" in f for f in crafter_rules().facts)
    _do(env, "sleep")
    assert not env._player.sleeping
    env._player.inventory["energy"] -= 1
    _do(env, "sleep")
    assert env._player.sleeping


def test_asleep_every_action_acts_as_sleep(env: CrafterEnv) -> None:
    assert any("asleep, every action acts as \"sleep\"" in f for f in crafter_rules().facts)
    _clear_around(env, 2)
    env._player.inventory["energy"] = 3
    _do(env, "sleep")
    start = tuple(int(v) for v in env._player.pos)
    _do(env, "move_left")
    assert env._player.sleeping and tuple(int(v) for v in env._player.pos) == start


def test_a_zombie_next_to_the_player_shares_a_side_as_the_game_measures(env: CrafterEnv) -> None:
    fact = next(f for f in crafter_rules().facts if f.startswith("A zombie"))
    assert "within 8 steps (counting |dx| + |dy|)" in fact and "a diagonal cell is not next to it" in fact
    zombie = objects.Zombie(env._env._world, env._player.pos + np.array([1, 1]), env._player)
    assert zombie.distance(env._player) == 2  # diagonal: two steps, so out of its reach


def test_hunger_rate_matches_the_game(env: CrafterEnv) -> None:
    fact = next(f for f in crafter_rules().facts if f.startswith("Food drops"))
    every = int(fact.split("about every ")[1].split(" ")[0])
    _clear_around(env, 4)
    start = env._player.inventory["food"]
    steps = 0
    while env._player.inventory["food"] == start:
        _do(env, "noop")
        steps += 1
    assert steps == every




def test_the_served_day_and_night_is_the_games_daylight(env: CrafterEnv) -> None:
    """The cycle the rules state (period, night window) is the daylight a real env has, step by step."""
    fact = next(f for f in crafter_rules().facts if f.startswith("Day and night"))
    cycle = int(fact.split("repeats every ")[1].split(" ")[0])
    window = fact.split("(night) from step ")[1].split(" of every")[0]
    night_from, night_to = (int(v) for v in window.split(" to step "))
    seen = []
    for _ in range(cycle + 1):
        seen.append(env._env._world.daylight)
        _do(env, "noop")
    assert seen[0] == pytest.approx(seen[cycle]) and seen[0] == pytest.approx(crafter_cycle.daylight(0))
    dark = [t for t in range(cycle) if seen[t] < crafter_cycle.DARK]
    assert (dark[0], dark[-1] + 1) == (night_from, night_to)


def test_zombies_appear_only_where_and_as_far_as_the_rules_say(env: CrafterEnv) -> None:
    """Over two nights of a real world, every zombie appears on the material, and at least the distance from the
    player, that the served sentence states; and more appear by night than by day."""
    fact = next(f for f in crafter_rules().facts if f.startswith("Creatures appear"))
    zombies = next(part for part in fact.split("; ") if "zombies only on" in part)
    material = zombies.split("zombies only on ")[1].split(" cells")[0]
    distance = int(zombies.split("at least ")[1].split(" steps")[0])
    assert "by full day they disappear again" in zombies
    world, at_night = env._env._world, []
    known = {id(obj) for obj in world.objects if isinstance(obj, objects.Zombie)}  # the world's own, not balanced
    for _ in range(600):
        _do(env, "noop")
        env._player.health = 9  # kept alive: the test watches where creatures appear, not the player
        for obj in world.objects:
            if isinstance(obj, objects.Zombie) and id(obj) not in known:
                known.add(id(obj))
                assert world[obj.pos][0] == material
                assert env._player.distance(obj.pos) >= distance  # balanced after the creatures moved: not moved
                at_night.append(world.daylight < crafter_cycle.DARK)
    assert sum(at_night) > len(at_night) - sum(at_night), at_night
