"""MineDojo's rules, generated from the Minecraft data MineDojo ships: ``minedojo/sim/mc_meta/mc_constants.json``
(Malmo's dump of the game's recipes and items), read through ``minedojo.sim.mc_meta.mc``.

Every amount in the served rules comes from that data; nothing about Minecraft is typed here. What the
data does not state is left out and said so in a fact (the agent reads the facts):

- Collecting: which tool harvests which block is not in mc_constants.json, so there are no collect rules;
  the data's per-block ``needsNoTool`` flag (a tool is needed, not which one) becomes a fact.
- Fuel: smelting needs fuel, but the data names neither the fuels nor how much one smelt burns.
- Nearby: how close a crafting table or furnace must be is not in the data (``nearby_distance`` stays 0);
  the backend's ``nearby_tools`` observation says when one is within reach.
- Materials, walkable cells and placing: the data's block ids ("log") are not the names the observation
  reports ("wood"), and walking in 3-D Minecraft is not a cell rule, so they are left empty.

Decisions
---------
- Outputs: the backend's items (``minedojo.ITEMS``). Ingredients are named as the backend's inventory names
  them (its aliases: "log2", the acacia/dark oak logs, counts as "log").
- Alternative recipes: every distinct recipe is its own MakeRule (ways_to_get lists them all); recipes that
  are equal after aliasing are one rule (MineDojo's data lists planks-from-log once per wood variant). For
  each item, recipes made only of the backend's items come first (so ``achievement_rule`` and the first of
  ``ways_to_get`` are one an agent can follow), then crafting before smelting, then the data's order.
- Crafting table: a crafting recipe whose ``recipeSize`` is not one of MineDojo's own personal-crafting
  sizes (mc.py's ``ALL_PERSONAL_CRAFTING_ITEMS``: 0, 1, 2, 4) needs a crafting table nearby; smelting
  needs a furnace nearby.
- Action names: the backend's ``craft:<item>`` where MineDojo's craft action (functional 4) runs that
  recipe: for an item in mc.py's hand or table-only NN lists its crafting recipes, for an item in its smelt
  list its smelting recipes (MineDojo routes ``craft:iron_ingot`` to smelting, so the iron-nugget recipe has
  no action). Recipes no action runs keep ``craft_<item>`` / ``smelt_<item>`` and a fact lists them.
- Achievement: the backend's achievement for the item made (``ACHIEVEMENT_ITEMS``) where its name is
  ``<kind>_<item>`` of the rule (craft_planks on the planks recipe, smelt_iron_ingot on smelting iron ore), as
  in Crafter.
  The backend unlocks an item's achievement whenever a step raises the item's count, whichever way, but a
  rule naming collect_coal or collect_diamond would point a planner at crafting them from coal or diamond
  blocks rather than at mining, which the data has no rules for; so collect_* achievements stay off make
  rules, and so does smelt_iron_ingot off the iron-nugget crafting recipe.
- Item limits: ``max`` is the item's ``stackSize`` (one inventory slot) from the data; ``initial`` is 0.

Checked once by hand against the real mc_constants.json through MineDojo's own mc.py (24 make rules, 32 item
limits); the tests run on ``tests/unit/env_server/fake_minedojo.py``, a subset of that data.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import logging
from types import ModuleType
from typing import Any

from rlgpt.v1 import common_pb2
from rlgpt.world_rules import render_rules
from services.env_server.backends.base import package_version

log = logging.getLogger(__name__)

MC_MODULE = "minedojo.sim.mc_meta.mc"
PERSONAL_RECIPE_SIZES = frozenset({0, 1, 2, 4})
"""``recipeSize`` values MineDojo's mc.py counts as craftable in the player's own 2x2 grid."""
CRAFTING_TABLE = "crafting_table"
FURNACE = "furnace"
CRAFT, SMELT = "craft", "smelt"


def action_name(kind: str, item: str, mc: ModuleType | None = None) -> str:
    """The action a MakeRule names: the backend's ``craft:<item>`` where MineDojo's craft action runs this kind
    of recipe for the item (mc.py's NN lists: hand and table-only items craft, the others smelt), otherwise
    ``craft_<item>`` / ``smelt_<item>``, which no action performs (see the module docstring)."""
    if mc is not None:
        crafted = set(getattr(mc, "ALL_HAND_CRAFT_ITEMS_NN_ACTIONS", ())) | set(
            getattr(mc, "ALL_TABLE_CRAFT_ONLY_ITEMS_NN_ACTIONS", ()))
        smelted = set(getattr(mc, "ALL_SMELT_ITEMS_NN_ACTIONS", ()))
        if item in (crafted if kind == CRAFT else smelted):
            return f"craft:{item}"
    return f"{kind}_{item}"


@dataclasses.dataclass(frozen=True)
class _Recipe:
    kind: str
    uses: tuple[tuple[str, int], ...]
    gives: int
    nearby: tuple[str, ...]

    def key(self) -> tuple[Any, ...]:
        return self.kind, tuple(sorted(self.uses)), self.gives, self.nearby


def _uses(ingredients: dict[str, Any], aliases: dict[str, str], applied: set[str]) -> tuple[tuple[str, int], ...]:
    merged: dict[str, int] = {}
    for name, count in ingredients.items():
        if name in aliases:
            applied.add(name)
            name = aliases[name]
        merged[name] = merged.get(name, 0) + int(count)
    return tuple(merged.items())


def _recipes(mc: ModuleType, item: str, items: frozenset[str], aliases: dict[str, str],
             applied: set[str]) -> list[_Recipe]:
    """The distinct recipes that make ``item``, in the order described in the module docstring; the aliases
    used are added to ``applied``."""
    found: list[_Recipe] = []
    for recipe in mc.CRAFTING_RECIPES_BY_OUTPUT.get(item, []):
        size = int(recipe.get("recipeSize", 0))
        found.append(_Recipe(CRAFT, _uses(recipe["ingredients"], aliases, applied),
                             int(recipe.get("outputCount", 1)),
                             () if size in PERSONAL_RECIPE_SIZES else (CRAFTING_TABLE,)))
    for recipe in mc.SMELTING_RECIPES_BY_OUTPUT.get(item, []):
        found.append(_Recipe(SMELT, _uses(recipe["ingredients"], aliases, applied), int(recipe.get("out", 1)),
                             (FURNACE,)))
    distinct: dict[tuple[Any, ...], _Recipe] = {}
    for recipe in found:
        if recipe.uses and item not in dict(recipe.uses):  # empty or circular (mc.py drops these too)
            distinct.setdefault(recipe.key(), recipe)
    return sorted(distinct.values(), key=lambda r: not all(name in items for name, _ in r.uses))


def _item_records(mc: ModuleType) -> dict[str, dict[str, Any]]:
    data = getattr(mc, "all_data", None)
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        log.warning("minedojo rules: %s has no all_data['items']; item limits and block facts left out", MC_MODULE)
        return {}
    return {str(record["type"]): record for record in data["items"] if "type" in record}


def stack_limit(mc: ModuleType) -> int:
    """The largest ``stackSize`` of the data's items (Minecraft's slot of 64); 0 when the data names none."""
    sizes = [r["stackSize"] for r in _item_records(mc).values() if isinstance(r.get("stackSize"), int)]
    return max(sizes, default=0)


def _listed(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


def _facts(rules: common_pb2.WorldRules, records: dict[str, dict[str, Any]], mc: ModuleType,
           items: tuple[str, ...], actions: tuple[str, ...], aliases: dict[str, str]) -> list[str]:
    facts = []
    sizes = ", ".join(str(s) for s in sorted(PERSONAL_RECIPE_SIZES))
    by_hand = sorted({r.item for r in rules.make if not r.nearby})
    facts.append(f"Crafting recipes larger than the player's own 2x2 grid (recipeSize other than {sizes} in "
                 f"MineDojo's recipe data) need a crafting table nearby; the others are crafted anywhere "
                 f"(made by hand here: {_listed(by_hand)}).")
    facts.append("Smelting needs a furnace nearby and fuel; MineDojo's data states neither which items are "
                 "fuel nor how much fuel one smelt uses.")
    facts.append("How near a crafting table or furnace must be is not in MineDojo's data; the observation's "
                 "nearby_tools (agent.nearby_crafting_table, agent.nearby_furnace) says when one is within reach.")
    used = {name for r in rules.make for name in (c.item for c in r.uses)}
    mentioned = [name for name in sorted(set(items) | used) if records.get(name, {}).get("block") is True]
    need_tool = [name for name in mentioned if records[name].get("needsNoTool") is False]
    if mentioned:
        facts.append("Which tool mines which block is not in MineDojo's data, so these rules have no collecting "
                     "rules. The data marks these blocks as dropping nothing unless mined with a suitable tool "
                     f"(needsNoTool false): {_listed(need_tool)}.")
    else:
        facts.append("Which tool mines which block is not in MineDojo's data, so these rules have no collecting "
                     "rules.")
    placeable = [name for name in items if records.get(name, {}).get("block") is True]
    if placeable:
        facts.append(f"Blocks among the items (\"block\" true in MineDojo's item data): {_listed(placeable)}; a "
                     "crafting table or furnace must be placed in the world to be nearby.")
    several = sorted({r.item for r in rules.make if sum(1 for o in rules.make if o.item == r.item) > 1})
    merged = [f"{alias} counts as {name}" for alias, name in aliases.items()]
    facts.append(f"Items with several recipes have one rule per recipe, those made only of this backend's items "
                 f"first ({_listed(several)}); ingredients are named as this backend's inventory names them"
                 + (f" ({'; '.join(merged)})" if merged else "") + ".")
    if rules.items:
        slots = getattr(mc, "N_INV_SLOTS", None)
        facts.append("An item's maximum is the stack size of one inventory slot in MineDojo's data"
                     + (f" (the inventory has {int(slots)} slots)" if slots else "")
                     + "; the inventory starts empty unless the task gives items.")
    missing = sorted({r.action for r in rules.make} - set(actions))
    if missing:
        facts.append("MineDojo's craft action runs one kind of recipe per item (the hand or table recipe, or "
                     "smelting, by mc.py's lists), so no action performs these rules' other recipes: "
                     f"{_listed(missing)}.")
    return facts


def minedojo_rules(mc: ModuleType) -> common_pb2.WorldRules:
    """The rules stated by MineDojo's Minecraft data module ``mc`` (``minedojo.sim.mc_meta.mc``)."""
    # Imported here: minedojo.py imports this module for its spec.
    from services.env_server.backends import minedojo as backend

    items = tuple(backend.ITEMS)
    aliases = dict(backend._ITEM_ALIASES)
    achievements = set(backend.ACHIEVEMENT_ITEMS)
    make = []
    applied: set[str] = set()
    for item in items:
        for recipe in _recipes(mc, item, frozenset(items), aliases, applied):
            action = action_name(recipe.kind, item, mc)
            achievement = f"{recipe.kind}_{item}"
            make.append(common_pb2.MakeRule(
                item=item, action=action,
                uses=[common_pb2.ItemCount(item=name, count=count) for name, count in recipe.uses],
                nearby=list(recipe.nearby), gives=recipe.gives,
                achievement=achievement if achievement in achievements else ""))
    records = _item_records(mc)
    limits = [common_pb2.ItemLimit(item=item, initial=0, max=int(records[item]["stackSize"]))
              for item in items if isinstance(records.get(item, {}).get("stackSize"), int)]
    rules = common_pb2.WorldRules(
        source=f"minedojo {package_version('minedojo')}: sim/mc_meta/mc_constants.json (recipes, items) read "
               f"through {MC_MODULE}",
        make=make, items=limits)
    rules.facts.extend(_facts(rules, records, mc, items, (*backend.ACTIONS, *backend.functional_actions(mc)),
                              {alias: name for alias, name in aliases.items() if alias in applied}))
    rules.text = render_rules(rules)
    return rules


@functools.cache
def _cached(mc: ModuleType) -> common_pb2.WorldRules:
    return minedojo_rules(mc)


def installed_minedojo_rules() -> common_pb2.WorldRules:
    """The rules of the installed MineDojo (``BackendSpec.rules``): imports its data module only when called,
    so a server without MineDojo still starts (Describe calls this only when the backend is available)."""
    return _cached(importlib.import_module(MC_MODULE))
