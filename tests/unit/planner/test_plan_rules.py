"""Plans checked against Crafter's rules as the env server generates them, and repaired from them."""

from __future__ import annotations

import pytest

from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.env_server.describe import describe
from services.env_server.settings import EnvServerSettings
from services.planner.plan_rules import plan_violations, repair_plan


@pytest.fixture(scope="module")
def crafter() -> env_pb2.DescribeResponse:
    return describe("crafter", EnvServerSettings())  # what Describe serves, without a server


def got(achievement: str) -> common_pb2.Condition:
    return common_pb2.Condition(achievement=achievement)


def held(item: str, count: int) -> common_pb2.Condition:
    return common_pb2.Condition(inventory=common_pb2.ItemCount(item=item, count=count))


def task(name: str, **start: int) -> common_pb2.TaskSpec:
    return common_pb2.TaskSpec(name=name, success=[got(name)],
                               start_inventory=[common_pb2.ItemCount(item=k, count=v) for k, v in start.items()])


def plan(*subtasks: tuple[str, common_pb2.Condition]) -> planner_pb2.Plan:
    return planner_pb2.Plan(rationale="the model's", subtasks=[
        planner_pb2.SubTask(name=name, description=f"the model's {name}", success=[c],
                            decision=planner_pb2.DECISION_RL, skills=["explore"]) for name, c in subtasks])


def check(crafter: env_pb2.DescribeResponse, p: planner_pb2.Plan, goal: str, allowed: frozenset[str] = frozenset(),
          **start: int) -> list[str]:
    return plan_violations(p, task(goal, **start), crafter.rules, set(crafter.items), allowed)


def repair(crafter: env_pb2.DescribeResponse, p: planner_pb2.Plan, goal: str,
           allowed: frozenset[str] = frozenset(), **start: int) -> planner_pb2.Plan:
    return repair_plan(p, task(goal, **start), crafter.rules, set(crafter.items), allowed)


def conditions(p: planner_pb2.Plan) -> list[str]:
    return [c.achievement or f"{c.inventory.count} {c.inventory.item}" for st in p.subtasks for c in st.success]


GOOD = plan(("wood", held("wood", 3)), ("table", got("place_table")), ("pickaxe", got("make_wood_pickaxe")))
SKIPPED = plan(("wood", held("wood", 2)), ("pickaxe", got("make_wood_pickaxe")))  # 2 wood: no table and pickaxe
MERGED = plan(("wood", held("wood", 3)), ("table_and_pickaxe", got("make_wood_pickaxe")))
WRONG_ORDER = plan(("table", got("place_table")), ("wood", held("wood", 3)), ("pickaxe", got("make_wood_pickaxe")))
SIDE_QUEST = plan(("wood", held("wood", 3)), ("cow", got("eat_cow")), ("table", got("place_table")),
                  ("pickaxe", got("make_wood_pickaxe")))
TOO_FEW = plan(("wood", held("wood", 2)), ("table", got("place_table")), ("pickaxe", got("make_wood_pickaxe")))
BROKEN = {
    "skipped": (SKIPPED, ["sub-task 2 (pickaxe) needs a table nearby but no sub-task before it places one: add a "
                          "sub-task that places a table (place_table) before it"]),
    "wrong order": (WRONG_ORDER, ["sub-task 1 (table) needs 2 wood, which is got by sub-task 2 (wood), which comes "
                                  "after it: move it before sub-task 1"]),
    "side quest": (SIDE_QUEST, ["sub-task 2 (cow) does not help reach the task's goal (achievement "
                                "make_wood_pickaxe) by the game's rules: remove it"]),
    # The table uses 2 of the 2 wood: none is left for the pickaxe.
    "too few": (TOO_FEW, ["sub-task 3 (pickaxe) needs 1 wood but the sub-tasks before it leave 0: add a sub-task "
                          "that gets wood before it"]),
}


def test_a_plan_within_the_rules_has_no_violations(crafter) -> None:
    assert check(crafter, GOOD, "make_wood_pickaxe") == []
    # A step that holds the wood for the table and the pickaxe may place the table itself (a capable model's
    # "place a table and make the pickaxe" sub-task).
    assert check(crafter, MERGED, "make_wood_pickaxe") == []
    # The sub-tasks of one condition each may also share one: conditions of a sub-task provide for each other.
    both = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="start", success=[got("place_table"),
                                                                                 held("wood", 3)]),
                                      planner_pb2.SubTask(name="pickaxe", success=[got("make_wood_pickaxe")])])
    assert check(crafter, both, "make_wood_pickaxe") == []


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_broken_rule_is_named_in_one_sentence_and_the_repair_keeps_the_rules(crafter, case) -> None:
    broken, sentences = BROKEN[case]
    assert check(crafter, broken, "make_wood_pickaxe") == sentences
    repaired = repair(crafter, broken, "make_wood_pickaxe")
    assert check(crafter, repaired, "make_wood_pickaxe") == []
    assert conditions(repaired) == ["3 wood", "place_table", "make_wood_pickaxe"]
    assert repaired.rationale.startswith("the model's | repaired from the rules: ")


def test_missing_tools_amounts_and_placed_things_are_said_with_what_to_do(crafter) -> None:
    one_wood = plan(("wood", got("collect_wood")), ("table", got("place_table")), ("pickaxe", got("make_wood_pickaxe")))
    assert check(crafter, one_wood, "make_wood_pickaxe") == [
        "sub-task 2 (table) needs 2 wood but the sub-tasks before it leave 1: get 1 more wood before it",
        "sub-task 3 (pickaxe) needs 1 wood but the sub-tasks before it leave 0: add a sub-task that gets wood "
        "before it"]
    assert check(crafter, plan(("stone", got("collect_stone"))), "collect_stone") == [
        "sub-task 1 (stone) needs to hold 1 wood_pickaxe (a tool, not used up) but the sub-tasks before it leave 0: "
        "add a sub-task that gets wood_pickaxe before it"]
    # Too little wood to place the table itself: the later table step is named.
    late_table = plan(("wood", held("wood", 2)), ("pickaxe", got("make_wood_pickaxe")), ("table", got("place_table")),
                      ("stone", got("collect_stone")))
    assert check(crafter, late_table, "collect_stone") == [
        "sub-task 2 (pickaxe) needs a table nearby, which is placed by sub-task 3 (table), which comes after it: "
        "move it before sub-task 2",
        "sub-task 3 (table) needs 2 wood but the sub-tasks before it leave 1: get 1 more wood before it"]
    # Amounts count: a stone pickaxe and a wood pickaxe use 1 wood each, the table 2: 4 wood, not 3.
    short = plan(("wood", held("wood", 3)), ("table", got("place_table")), ("pickaxe", got("make_wood_pickaxe")),
                 ("stone", held("stone", 1)), ("stone_pickaxe", got("make_stone_pickaxe")))
    assert check(crafter, short, "make_stone_pickaxe") == [
        "sub-task 5 (stone_pickaxe) needs 1 wood but the sub-tasks before it leave 0: add a sub-task that gets wood "
        "before it"]
    # What the task starts with counts: with a pickaxe in hand stone needs nothing before it.
    assert check(crafter, plan(("stone", got("collect_stone"))), "collect_stone", wood_pickaxe=1) == []


@pytest.mark.parametrize(("goal", "chain"), [
    ("make_wood_pickaxe", ["3 wood", "place_table", "make_wood_pickaxe"]),
    ("collect_stone", ["3 wood", "place_table", "make_wood_pickaxe", "collect_stone"]),
    ("make_stone_pickaxe", ["4 wood", "place_table", "make_wood_pickaxe", "1 stone", "make_stone_pickaxe"]),
    ("collect_diamond", ["5 wood", "place_table", "make_wood_pickaxe", "1 coal", "5 stone", "make_stone_pickaxe",
                         "1 iron", "place_furnace", "make_iron_pickaxe", "collect_diamond"]),
])
def test_an_empty_plan_is_repaired_into_the_rules_chain(crafter, goal, chain) -> None:
    repaired = repair(crafter, planner_pb2.Plan(), goal)
    assert conditions(repaired) == chain
    assert check(crafter, repaired, goal) == []
    assert all(st.decision == planner_pb2.DECISION_CODE and st.description for st in repaired.subtasks)
    assert [st.name for st in repaired.subtasks][:3] == ["get_" + chain[0].replace(" ", "_"), "place_table",
                                                         "make_wood_pickaxe"]
    table = repaired.subtasks[1]
    assert table.description == "Place a table (place_table), which uses 2 wood."
    assert repaired.subtasks[0].description.startswith(f"Get {chain[0]} into the inventory: do on tree")


def test_the_repair_keeps_the_models_subtasks_and_starts_from_the_start_inventory(crafter) -> None:
    repaired = repair(crafter, plan(("wood", held("wood", 3)), ("pickaxe", got("make_wood_pickaxe"))),
                      "make_wood_pickaxe")
    wood, table, pickaxe = repaired.subtasks
    assert (wood.name, wood.description, wood.decision, list(wood.skills)) == (
        "wood", "the model's wood", planner_pb2.DECISION_RL, ["explore"])
    assert (table.name, table.decision) == ("place_table", planner_pb2.DECISION_CODE)  # the one new step
    assert pickaxe.name == "pickaxe" and "added place_table" in repaired.rationale
    assert conditions(repair(crafter, planner_pb2.Plan(), "collect_stone", wood_pickaxe=1)) == ["collect_stone"]
    assert conditions(repair(crafter, planner_pb2.Plan(), "make_wood_pickaxe", wood=1)) == [
        "3 wood", "place_table", "make_wood_pickaxe"]  # 3 held in all: 1 from the start, 2 collected


def test_a_survival_need_the_critic_asked_for_is_no_side_quest_and_stays_where_it_was(crafter) -> None:
    allowed = frozenset({"eat_cow"})
    assert check(crafter, SIDE_QUEST, "make_wood_pickaxe", allowed) == []
    early_cow = plan(("cow", got("eat_cow")), ("wood", held("wood", 3)), ("pickaxe", got("make_wood_pickaxe")))
    for p, names in [(SIDE_QUEST, ["wood", "cow", "table", "pickaxe"]),
                     (early_cow, ["cow", "wood", "place_table", "pickaxe"])]:
        repaired = repair(crafter, p, "make_wood_pickaxe", allowed)
        assert [st.name for st in repaired.subtasks] == names
        assert check(crafter, repaired, "make_wood_pickaxe", allowed) == []
    assert [st.name for st in repair(crafter, SIDE_QUEST, "make_wood_pickaxe").subtasks] == [
        "wood", "table", "pickaxe"]  # not asked for: dropped


def test_the_same_plan_gives_the_same_verdict_and_repair(crafter) -> None:
    for broken, _ in BROKEN.values():
        assert check(crafter, broken, "collect_diamond") == check(crafter, broken, "collect_diamond")
        first, second = repair(crafter, broken, "collect_diamond"), repair(crafter, broken, "collect_diamond")
        assert first.SerializeToString(deterministic=True) == second.SerializeToString(deterministic=True)


def test_without_rules_nothing_is_checked(crafter) -> None:
    none = common_pb2.WorldRules()
    assert plan_violations(SIDE_QUEST, task("make_wood_pickaxe"), none, set(crafter.items)) == []
