"""Missing prerequisites, read from world rules: hand-made rules, then the rules a real env server serves."""

from __future__ import annotations

from critic_samples import episode, request

from rlgpt.v1 import common_pb2
from services.critic.prerequisites import missing_items, obtained, prerequisite_words, required_tools

Item = common_pb2.ItemCount
# A small tech tree: wood by hand, a table from wood, a pickaxe from wood near a table, stone with the pickaxe.
RULES = common_pb2.WorldRules(
    collect=[common_pb2.CollectRule(material="tree", action="do", receives=[Item(item="wood", count=1)],
                                    achievements=["collect_wood"]),
             common_pb2.CollectRule(material="stone", action="do", requires=[Item(item="pickaxe", count=1)],
                                    receives=[Item(item="stone", count=1)], achievements=["collect_stone"])],
    place=[common_pb2.PlaceRule(item="table", action="place_table", uses=[Item(item="wood", count=2)],
                                achievement="place_table"),
           common_pb2.PlaceRule(item="furnace", action="place_furnace", uses=[Item(item="stone", count=1)],
                                nearby=["table"], achievement="place_furnace")],
    make=[common_pb2.MakeRule(item="pickaxe", action="make_pickaxe", uses=[Item(item="wood", count=1)],
                              nearby=["table"], achievement="make_pickaxe")])


def test_required_tools_follow_the_materials_the_start_lacks() -> None:
    assert required_tools(RULES, "collect_stone", {}) == ["pickaxe"]
    assert required_tools(RULES, "place_furnace", {}) == ["pickaxe"]  # the furnace uses stone
    assert required_tools(RULES, "place_furnace", {"stone": 1}) == []
    assert required_tools(RULES, "collect_wood", {}) == [] and required_tools(RULES, "unknown", {}) == []


def test_prerequisite_words_are_tools_made_placed_and_nearby_things_longest_first() -> None:
    assert prerequisite_words(RULES) == ("furnace", "pickaxe", "table")


def test_obtained_counts_start_final_inventories_and_what_achievements_give_or_place() -> None:
    rollouts = [episode(final_inventory=[Item(item="wood", count=2), Item(item="sapling", count=0)]),
                episode(achievements=["make_pickaxe", "place_table"])]
    assert obtained(RULES, rollouts, {"stone": 1, "coal": 0}) == {"stone", "wood", "pickaxe", "table"}


def test_missing_items_from_texts_and_from_the_rules() -> None:
    said = request(rules=RULES, rollouts=[episode(text="it requires the table")],
                   errors=[common_pb2.SkillError(message="Needs a Furnace")])
    assert missing_items(said, list(said.errors), 0.5) == {
        "furnace": "named in text: 'needs a furnace'", "table": "named in text: 'requires the table'"}
    stone = request(rules=RULES, rollouts=[episode()], success=[common_pb2.Condition(achievement="collect_stone")])
    assert list(missing_items(stone, [], 0.0)) == ["pickaxe"]
    assert missing_items(stone, [], 0.25) == {}  # something succeeded: the rules' tools were had
    held = request(rules=RULES, rollouts=[episode(text="needs a pickaxe")], start_inventory=[Item(item="pickaxe",
                                                                                                   count=1)])
    assert missing_items(held, [], 0.0) == {}
    assert missing_items(request(rollouts=[episode(text="needs a pickaxe")]), [], 0.0) == {}  # no rules, no guess


# --- with the rules a real env server serves ------------------------------------------------------------------


