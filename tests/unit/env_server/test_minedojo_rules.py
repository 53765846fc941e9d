"""MineDojo's served rules, generated from MineDojo's Minecraft data (here: the stand-in's subset of the real
mc_constants.json, ``fake_minedojo.mc``; Minecraft cannot run on this machine)."""

from __future__ import annotations

import copy
import re
import sys
import types
from typing import Any

import pytest
from env_server_support import AbortingContext
from fakes import fake_minedojo

from rlgpt import world_rules
from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.backends import base
from services.env_server.backends.minedojo import ACHIEVEMENTS, ACTIONS, ITEMS, MineDojoBackend, functional_actions
from services.env_server.backends.minedojo_rules import installed_minedojo_rules, minedojo_rules
from services.env_server.servicer import EnvServicer
from services.env_server.settings import EnvServerSettings

# `fake` (the stand-in installed as minedojo): tests/unit/env_server/conftest.py


@pytest.fixture
def rules() -> common_pb2.WorldRules:
    return minedojo_rules(fake_minedojo.mc)


def _make(rules: common_pb2.WorldRules, item: str) -> list[common_pb2.MakeRule]:
    return [r for r in rules.make if r.item == item]


def _uses(rule: common_pb2.MakeRule) -> dict[str, int]:
    return {c.item: c.count for c in rule.uses}


def _mc_with(crafting: dict[str, list[dict[str, Any]]]) -> types.ModuleType:
    """A copy of the stand-in's data module whose crafting recipes for some items are replaced."""
    mc = types.ModuleType("minedojo.sim.mc_meta.mc")
    mc.all_data = fake_minedojo.mc.all_data
    mc.N_INV_SLOTS = fake_minedojo.mc.N_INV_SLOTS
    mc.CRAFTING_RECIPES_BY_OUTPUT = {**copy.deepcopy(fake_minedojo.mc.CRAFTING_RECIPES_BY_OUTPUT), **crafting}
    mc.SMELTING_RECIPES_BY_OUTPUT = fake_minedojo.mc.SMELTING_RECIPES_BY_OUTPUT
    for name in ("ALL_HAND_CRAFT_ITEMS_NN_ACTIONS", "ALL_TABLE_CRAFT_ONLY_ITEMS_NN_ACTIONS",
                 "ALL_SMELT_ITEMS_NN_ACTIONS", "ALL_CRAFT_SMELT_ITEMS"):
        setattr(mc, name, getattr(fake_minedojo.mc, name))
    return mc


# --- make rules --------------------------------------------------------------------------------------
def test_wooden_pickaxe_needs_3_planks_and_2_sticks_at_a_crafting_table(rules: common_pb2.WorldRules) -> None:
    [rule] = _make(rules, "wooden_pickaxe")
    assert _uses(rule) == {"planks": 3, "stick": 2}
    assert list(rule.nearby) == ["crafting_table"]
    assert rule.gives == 1
    assert rule.action == "craft:wooden_pickaxe"  # the backend's action that runs this recipe
    assert rule.achievement == "craft_wooden_pickaxe"


def test_planks_need_no_table_and_log2_recipes_count_as_log(rules: common_pb2.WorldRules) -> None:
    # The data lists planks-from-log four times and planks-from-log2 twice: one rule in backend names.
    [rule] = _make(rules, "planks")
    assert _uses(rule) == {"log": 1}
    assert list(rule.nearby) == []
    assert rule.gives == 4
    assert rule.achievement == "craft_planks"


def test_recipe_size_decides_the_crafting_table(rules: common_pb2.WorldRules) -> None:
    # recipeSize 2 (stick) and 4 (crafting_table) fit the player's 2x2 grid; 3 (the sword's column) and 9 do not.
    assert [list(r.nearby) for r in _make(rules, "stick")] == [[]]
    assert [list(r.nearby) for r in _make(rules, "crafting_table")] == [[]]
    assert [list(r.nearby) for r in _make(rules, "wooden_sword")] == [["crafting_table"]]
    assert [list(r.nearby) for r in _make(rules, "furnace")] == [["crafting_table"]]
    assert _uses(_make(rules, "furnace")[0]) == {"cobblestone": 8}
    assert _make(rules, "stick")[0].gives == 4


def test_iron_ingot_is_smelted_in_a_furnace(rules: common_pb2.WorldRules) -> None:
    first, *others = _make(rules, "iron_ingot")
    assert first.action == "craft:iron_ingot"  # MineDojo's craft action smelts iron_ingot
    assert _uses(first) == {"iron_ore": 1}
    assert list(first.nearby) == ["furnace"]
    assert first.gives == 1
    assert first.achievement == "smelt_iron_ingot"
    # The data's crafting recipes (from nuggets, from a block) follow, without the smelting achievement and
    # with no action of the backend: MineDojo's craft:iron_ingot runs only the smelting recipe.
    assert [(r.action, _uses(r), r.gives, list(r.nearby), r.achievement) for r in others] == [
        ("craft_iron_ingot", {"iron_nugget": 9}, 1, ["crafting_table"], ""),
        ("craft_iron_ingot", {"iron_block": 1}, 9, [], "")]


def test_alternatives_made_of_backend_items_come_first(rules: common_pb2.WorldRules) -> None:
    coal = _make(rules, "coal")
    assert [(r.action, _uses(r), r.gives) for r in coal] == [
        ("craft:coal", {"log": 1}, 1), ("craft_coal", {"coal_block": 1}, 9), ("craft:coal", {"coal_ore": 1}, 1)]
    assert all(r.achievement == "" for r in coal)  # collect_coal is about mining, which the data has no rule for
    [torch] = _make(rules, "torch")  # the data lists this recipe twice
    assert (_uses(torch), torch.gives) == ({"coal": 1, "stick": 1}, 4)


def test_every_rule_is_about_backend_items_and_achievements(rules: common_pb2.WorldRules) -> None:
    assert rules.make
    assert {r.item for r in rules.make} <= set(ITEMS)
    assert {r.achievement for r in rules.make if r.achievement} <= set(ACHIEVEMENTS)
    assert all(r.action in (f"craft:{r.item}", f"craft_{r.item}", f"smelt_{r.item}") for r in rules.make)
    spec_actions = (*ACTIONS, *functional_actions(fake_minedojo.mc))
    # A rule's action is one of the backend's actions unless no action runs that recipe (a fact says which).
    assert {r.action for r in rules.make if r.action.startswith("craft:")} <= set(spec_actions)
    assert not rules.collect and not rules.place and not rules.materials and not rules.walkable
    assert minedojo_rules(fake_minedojo.mc) == rules  # deterministic


def test_amounts_come_from_the_data() -> None:
    recipe = {"outputItemName": "wooden_pickaxe", "outputCount": 2, "recipeSize": 4, "type": "ShapedOreRecipe",
              "ingredients": {"planks": 5, "stick": 1}}
    [rule] = _make(minedojo_rules(_mc_with({"wooden_pickaxe": [recipe]})), "wooden_pickaxe")
    assert (_uses(rule), rule.gives, list(rule.nearby)) == ({"planks": 5, "stick": 1}, 2, [])


def test_item_limits_are_the_data_stack_sizes(rules: common_pb2.WorldRules) -> None:
    limits = {i.item: (i.initial, i.max) for i in rules.items}
    assert limits["log"] == (0, 64)
    assert limits["wooden_pickaxe"] == (0, 1)
    assert "bucket" not in limits  # not in the stand-in's subset of the data: left out, not guessed


# --- what the data does not say ----------------------------------------------------------------------
def test_facts_say_what_the_data_does_not_give(rules: common_pb2.WorldRules) -> None:
    facts = list(rules.facts)
    tools = next(f for f in facts if "no collecting rules" in f)
    listed = tools.split("(needsNoTool false): ")[1].rstrip(".").split(", ")
    assert listed == ["coal_ore", "cobblestone", "furnace", "iron_ore", "stone"]
    fuel = next(f for f in facts if f.startswith("Smelting needs a furnace nearby and fuel"))
    assert "states neither" in fuel and not re.search(r"\d", fuel)  # no invented fuel amount
    assert any("nearby_tools" in f and "not in MineDojo's data" in f for f in facts)
    assert any("log2 counts as log" in f for f in facts)
    assert rules.nearby_distance == 0
    # The recipes MineDojo's craft action does not run (it smelts coal and iron_ingot) are listed.
    missing = next(f for f in facts if "no action performs these rules' other recipes" in f)
    assert missing.endswith(": craft_coal, craft_iron_ingot.")


# --- world_rules on these rules ------------------------------------------------------------------------
def test_world_rules_reads_these_rules(rules: common_pb2.WorldRules) -> None:
    [way] = world_rules.ways_to_get(rules, "wooden_pickaxe")
    assert (way.action, way.uses, way.nearby, way.gives) == (
        "craft:wooden_pickaxe", {"planks": 3, "stick": 2}, ("crafting_table",), 1)
    assert world_rules.ways_to_get(rules, "iron_ingot")[0].nearby == ("furnace",)
    assert world_rules.ways_to_get(rules, "log") == []  # collecting is not in the data
    smelt = world_rules.achievement_rule(rules, "smelt_iron_ingot")
    assert smelt is not None and smelt.uses == {"iron_ore": 1}
    assert world_rules.achievement_items(rules, "craft_stick") == {"stick": 4}
    assert world_rules.tools_needed(rules, "craft_wooden_pickaxe") == {}
    assert world_rules.achievement_rule(rules, "collect_log") is None


def test_text_states_the_amounts(rules: common_pb2.WorldRules) -> None:
    text = rules.text
    assert text == world_rules.render_rules(rules)
    assert ("- craft:wooden_pickaxe: uses 3 planks, 2 stick; needs crafting_table nearby; gives 1 wooden_pickaxe; "
            "achievement craft_wooden_pickaxe") in text
    assert "- craft:planks: uses 1 log; gives 4 planks; achievement craft_planks" in text
    assert ("- craft:iron_ingot: uses 1 iron_ore; needs furnace nearby; gives 1 iron_ingot; "
            "achievement smelt_iron_ingot") in text
    assert all(f in text for f in rules.facts)
    assert "mc_constants.json" in rules.source


# --- served by the env server --------------------------------------------------------------------------
def _describe(backend: str) -> env_pb2.DescribeResponse:
    servicer = EnvServicer(EnvServerSettings())
    try:
        return servicer.Describe(env_pb2.DescribeRequest(backend=backend), AbortingContext())
    finally:
        servicer.close()


def test_describe_serves_the_rules_when_minedojo_is_available(fake: Any) -> None:
    response = _describe("minedojo")
    assert response.available
    assert response.HasField("rules")
    assert response.rules == installed_minedojo_rules() == minedojo_rules(fake.mc)
    [rule] = [r for r in response.rules.make if r.item == "wooden_pickaxe"]
    assert _uses(rule) == {"planks": 3, "stick": 2}
    assert response.rules.text in response.skill_api


def test_describe_without_minedojo_serves_no_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "minedojo", None)  # `import minedojo` raises ImportError
    monkeypatch.setattr(base, "_loaded", {})
    response = _describe("minedojo")
    assert not response.available and "not available" in response.unavailable_reason
    assert not response.HasField("rules")
    with pytest.raises(ImportError):  # the data module is imported only when the rules are asked for
        installed_minedojo_rules()


def test_the_backend_spec_generates_the_rules(fake: Any) -> None:
    spec = MineDojoBackend().spec
    assert spec.rules is installed_minedojo_rules
    assert spec.rules().make == minedojo_rules(fake.mc).make
