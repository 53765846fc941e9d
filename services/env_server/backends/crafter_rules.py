"""Crafter's rules, generated from the installed game: ``data.yaml`` for what it states, the game's own code
(read with :mod:`ast`, never typed here) for what the data leaves implicit.

Every number in the served rules comes from the installed ``crafter`` package. A fact whose pattern is
not found in the installed code (another Crafter version) is left out and logged, never guessed;
``tests/unit/env_server/test_rules.py`` checks the served rules against the game's behaviour.
"""

from __future__ import annotations

import ast
import functools
import inspect
import logging
import textwrap
from collections.abc import Callable
from typing import Any

from crafter import constants, objects

from rlgpt.v1 import common_pb2
from rlgpt.world_rules import render_rules
from services.env_server.backends import crafter_cycle
from services.env_server.backends.base import package_version

log = logging.getLogger(__name__)
STATUS = ("health", "food", "drink", "energy")
INTERACT = "do"


def _counts(mapping: dict[str, int]) -> list[common_pb2.ItemCount]:
    return [common_pb2.ItemCount(item=k, count=int(v)) for k, v in mapping.items()]


# --- reading numbers out of the game's code --------------------------------------------------------------
def _tree(fn: Callable[..., Any]) -> ast.AST:
    return ast.parse(textwrap.dedent(inspect.getsource(fn)))


def _is_self_attr(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.value, ast.Name) \
        and node.value.id == "self"


def _is_inventory_key(node: ast.AST, key: str) -> bool:
    """``self.inventory['key']``."""
    return isinstance(node, ast.Subscript) and _is_self_attr(node.value, "inventory") \
        and isinstance(node.slice, ast.Constant) and node.slice.value == key


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    return None


def _threshold(fn: Callable[..., Any], attr: str, op: type) -> float | None:
    """The constant in ``self.<attr> <op> N`` inside ``fn``."""
    for node in ast.walk(_tree(fn)):
        if isinstance(node, ast.Compare) and _is_self_attr(node.left, attr) and len(node.ops) == 1 \
                and isinstance(node.ops[0], op):
            return _number(node.comparators[0])
    return None


def _increments(fn: Callable[..., Any], target: Callable[[ast.AST], bool]) -> list[float]:
    """Constants added to a target by ``target += N`` (or ``-=``) inside ``fn``, in source order."""
    found = []
    for node in ast.walk(_tree(fn)):
        if isinstance(node, ast.AugAssign) and target(node.target) and isinstance(node.op, (ast.Add, ast.Sub)):
            value = _number(node.value)
            if value is not None:
                found.append(value if isinstance(node.op, ast.Add) else -value)
    return found


def _assigned(fn: Callable[..., Any], attr: str) -> float | None:
    """The constant in ``self.<attr> = N`` inside ``fn``."""
    for node in ast.walk(_tree(fn)):
        if isinstance(node, ast.Assign) and any(_is_self_attr(t, attr) for t in node.targets):
            value = _number(node.value)
            if value is not None:
                return value
    return None


def _call_argument(fn: Callable[..., Any], method: str, index: int) -> float | None:
    """The constant positional argument ``index`` of a call to ``<x>.<method>(...)`` inside ``fn``."""
    for node in ast.walk(_tree(fn)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method \
                and len(node.args) > index:
            return _number(node.args[index])
    return None


def _constants_named(fn: Callable[..., Any], name: str) -> list[float]:
    """Constants assigned to the local ``name`` inside ``fn`` (e.g. ``damage = 7`` / ``damage = 2``)."""
    found = []
    for node in ast.walk(_tree(fn)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = _number(node.value)
            if value is not None:
                found.append(value)
    return found


def _compared_name(fn: Callable[..., Any], name: str, op: type) -> list[float]:
    """Constants in ``<name> <op> N`` comparisons inside ``fn`` (e.g. ``dist <= 8``), in source order."""
    found = []
    for node in ast.walk(_tree(fn)):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == name \
                and len(node.ops) == 1 and isinstance(node.ops[0], op):
            value = _number(node.comparators[0])
            if value is not None:
                found.append(value)
    return found


def _every(threshold: float | None) -> int | None:
    """A counter that grows by 1 per step and fires when it exceeds ``threshold`` fires every threshold+1 steps."""
    return None if threshold is None else int(abs(threshold)) + 1


def _fact(facts: list[str], text: Callable[[], str | None], name: str) -> None:
    try:
        sentence = text()
    except (OSError, TypeError, ValueError, KeyError, AttributeError) as exc:
        sentence = None
        log.warning("crafter rules: cannot read %s from the installed game: %s", name, exc)
    if sentence:
        facts.append(sentence)
    else:
        log.warning("crafter rules: %s not found in the installed game's code; left out of the rules", name)


def _code_facts(nearby_distance: int) -> list[str]:
    player = objects.Player
    maxima = {k: v["max"] for k, v in constants.items.items()}
    facts: list[str] = []

    def survival() -> str | None:
        hunger = _every(_threshold(player._update_life_stats, "_hunger", ast.Gt))
        thirst = _every(_threshold(player._update_life_stats, "_thirst", ast.Gt))
        fatigue = _every(_threshold(player._update_life_stats, "_fatigue", ast.Gt))
        rest = _every(_threshold(player._update_life_stats, "_fatigue", ast.Lt))
        if None in (hunger, thirst, fatigue, rest):
            return None
        return (f"Food drops by 1 about every {hunger} steps and drink by 1 about every {thirst} steps (half as "
                f"fast while sleeping); energy drops by 1 about every {fatigue} steps awake and rises by 1 about "
                f"every {rest} steps asleep.")

    def health() -> str | None:
        regen = _every(_threshold(player._degen_or_regen_health, "_recover", ast.Gt))
        degen = _every(_threshold(player._degen_or_regen_health, "_recover", ast.Lt))
        if regen is None or degen is None:
            return None
        return (f"Health rises by 1 about every {regen} steps while food, drink and energy are all above 0, and "
                f"falls by 1 about every {degen} steps while any of them is 0. At health 0 the player dies.")

    def sleep() -> str | None:
        source = inspect.getsource(player.update)
        if "'energy'] < constants.items['energy']['max']" not in source:
            return None
        ignores = "action = 'sleep'" in source.split("if self.sleeping:", 1)[-1].split("if action ==", 1)[0]
        return (f"\"sleep\" only starts sleeping when energy is below its maximum ({maxima['energy']}); asleep, "
                + ("every action acts as \"sleep\" (the player cannot move or do anything) until it wakes: "
                   if ignores else "")
                + "the player wakes up (achievement wake_up) once energy is back at the maximum, and also wakes "
                "up, without the achievement, when it takes damage.")

    def cow() -> str | None:
        cow_health = _assigned(objects.Cow.__init__, "health")
        food = [v for v in _increments(player._do_object, lambda t: _is_inventory_key(t, "food")) if v > 0]
        if cow_health is None or len(food) < 2:
            return None
        # _do_object adds food twice: the ripe plant (first in source order) and the cow.
        return (f"A cow has {int(cow_health)} health; each \"{INTERACT}\" on it deals damage (1 without a sword); "
                f"when its health reaches 0 it is eaten: food +{int(food[1])} (achievement eat_cow). Cows "
                "wander randomly.")

    def plant() -> str | None:
        ripe = None
        for node in ast.walk(_tree(objects.Plant)):  # the `ripe` property: self.grown > N
            if isinstance(node, ast.Compare) and _is_self_attr(node.left, "grown"):
                ripe = _number(node.comparators[0])
        food = [v for v in _increments(player._do_object, lambda t: _is_inventory_key(t, "food")) if v > 0]
        if ripe is None or not food:
            return None
        return (f"A placed plant (sapling) ripens after about {int(ripe)} steps; \"{INTERACT}\" on a ripe plant "
                f"gives food +{int(food[0])} (achievement eat_plant); \"{INTERACT}\" on an unripe one does "
                "nothing useful. Creatures next to a plant eat it.")

    def zombie() -> str | None:
        zombie_health = _assigned(objects.Zombie.__init__, "health")
        damage = _constants_named(objects.Zombie.update, "damage")
        cooldown = _assigned(objects.Zombie.update, "cooldown")
        chase = _compared_name(objects.Zombie.update, "dist", ast.LtE)
        if zombie_health is None or len(damage) < 2 or cooldown is None or len(chase) < 2:
            return None
        steps = _distance_words()
        return (f"A zombie mostly walks toward a player within {int(max(chase))} steps{steps[0]} and, when "
                f"{steps[1]}, deals "
                f"{int(min(damage))} damage ({int(max(damage))} to a sleeping player), then waits "
                f"{int(cooldown)} steps; it has {int(zombie_health)} health (achievement defeat_zombie).")

    def skeleton() -> str | None:
        skeleton_health = _assigned(objects.Skeleton.__init__, "health")
        arrow = arrow_damage()
        if skeleton_health is None or arrow is None:
            return None
        return (f"Skeletons shoot arrows that deal {arrow} damage; a "
                f"skeleton has {int(skeleton_health)} health (achievement defeat_skeleton). Arrows break tables "
                "and furnaces they hit.")

    def lava() -> str | None:
        if "'lava'" not in inspect.getsource(player._move):
            return None
        return "Walking onto lava kills the player at once (lava is walkable, so path finding must avoid it)."

    def swords() -> str | None:
        pairs = []
        for node in ast.walk(_tree(player._do_object)):
            # `self.inventory['wood_sword'] and 2` inside max([...])
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) and len(node.values) == 2:
                key, value = node.values
                if isinstance(key, ast.Subscript) and isinstance(key.slice, ast.Constant) \
                        and _number(value) is not None:
                    pairs.append(f"{key.slice.value} {int(_number(value))}")
        if not pairs:
            return None
        return "Damage of one hit: 1 without a sword; with the best sword held: " + ", ".join(pairs) + "."

    def make_nearby() -> str:
        size = 2 * nearby_distance + 1
        return (f"\"Nearby\" means within {nearby_distance} cell in x and y of the player ({size}x{size} square "
                "around it, diagonals included); the player does not need to face it.")

    _fact(facts, make_nearby, "the nearby area of make actions")
    _fact(facts, survival, "hunger, thirst and fatigue rates")
    _fact(facts, health, "health regeneration")
    _fact(facts, sleep, "the sleep rule")
    _fact(facts, cow, "cows")
    _fact(facts, plant, "plants")
    _fact(facts, zombie, "zombies")
    _fact(facts, skeleton, "skeletons")
    _fact(facts, crafter_cycle.skeleton_behaviour, "how skeletons move and shoot")
    _fact(facts, crafter_cycle.day_and_night, "the day and night cycle")
    _fact(facts, crafter_cycle.creatures, "where creatures appear")
    _fact(facts, swords, "sword damage")
    _fact(facts, lava, "lava")
    facts.append("Placing or making fails silently (nothing happens) when a requirement is missing.")
    return facts


@functools.cache
def arrow_damage() -> int | None:
    """Health an arrow's hit takes (crafter objects.Arrow.update); None when the game no longer says."""
    hits = _increments(objects.Arrow.update, lambda t: isinstance(t, ast.Attribute) and t.attr == "health")
    return int(abs(hits[0])) if hits else None


def _distance_words() -> tuple[str, str]:
    """How crafter measures a creature's distance to the player (``Object.distance``), in words: what "within N
    steps" counts, and what "next to it" means."""
    source = inspect.getsource(objects.Object.distance)
    if ".sum()" in source:
        return " (counting |dx| + |dy|)", "next to it (sharing a side; a diagonal cell is not next to it)"
    if ".max()" in source:
        return " (counting the larger of |dx| and |dy|)", "next to it (diagonal cells included)"
    return "", "next to it"


def _nearby_distance() -> int:
    distance = _call_argument(objects.Player._make, "nearby", 1)
    if distance is None:
        raise RuntimeError("cannot read the nearby distance of make actions from crafter/objects.py "
                           "(Player._make no longer calls world.nearby(pos, N)); update crafter_rules.py")
    return int(distance)


@functools.cache
def crafter_rules() -> common_pb2.WorldRules:
    """The rules of the installed Crafter (cached: the installed game does not change while we run)."""
    nearby_distance = _nearby_distance()
    collect = []
    for material, info in constants.collect.items():
        receives = dict(info.get("receive", {}))
        collect.append(common_pb2.CollectRule(
            material=material, requires=_counts(info.get("require", {})), receives=_counts(receives),
            leaves=info.get("leaves", material), probability=float(info.get("probability", 1.0)), action=INTERACT,
            achievements=[f"collect_{item}" for item in receives if f"collect_{item}" in constants.achievements]))
    place = [common_pb2.PlaceRule(
        item=name, action=f"place_{name}", uses=_counts(info.get("uses", {})), where=list(info.get("where", [])),
        nearby=list(info.get("nearby", [])), achievement=f"place_{name}"
        if f"place_{name}" in constants.achievements else "") for name, info in constants.place.items()]
    make = [common_pb2.MakeRule(
        item=name, action=f"make_{name}", uses=_counts(info.get("uses", {})), nearby=list(info.get("nearby", [])),
        gives=int(info.get("gives", 1)), achievement=f"make_{name}" if f"make_{name}" in constants.achievements
        else "") for name, info in constants.make.items()]
    items = [common_pb2.ItemLimit(item=name, initial=int(info["initial"]), max=int(info["max"]))
             for name, info in constants.items.items()]
    rules = common_pb2.WorldRules(
        source=f"crafter {package_version('crafter')}: data.yaml, and objects.py for the facts the data leaves "
               "implicit",
        materials=list(constants.materials), walkable=list(constants.walkable), collect=collect, place=place,
        make=make, items=items, nearby_distance=nearby_distance, facts=_code_facts(nearby_distance))
    rules.text = render_rules(rules, status=STATUS)
    return rules
