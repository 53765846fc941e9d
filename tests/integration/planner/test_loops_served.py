"""The loops' pieces: plan rules, attempts' helpers, the controller's chain, the modes and the state's records;
the RL sub-tasks of an iteration training together in rounds, against test doubles of the fast agent, learner and
critic (the whole loops run against real services in tests/integration)."""

from __future__ import annotations

from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.plans import implied_items, start_inventory

TABLE = common_pb2.Condition(achievement="place_table")


def test_implied_items_come_from_the_rules(env_server) -> None:
    rules = env_server.stub.Describe(env_pb2.DescribeRequest()).rules
    items = {"wood", "stone", "sapling", "wood_pickaxe"}

    def left(*conditions: common_pb2.Condition) -> dict[str, int]:
        return implied_items(list(conditions), rules, items)

    wood_gift = next(i.count for r in rules.collect if r.material == "tree" for i in r.receives if i.item == "wood")
    assert left(common_pb2.Condition(achievement="collect_wood")) == {"wood": wood_gift}
    assert left(common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=5))) == {"wood": 5}
    assert left(common_pb2.Condition(achievement="make_wood_pickaxe")) == {"wood_pickaxe": 1}
    assert left(common_pb2.Condition(achievement="place_table")) == {}  # placing leaves nothing in the inventory
    assert left(common_pb2.Condition(achievement="collect_drink")) == {}  # drink is a status value, not an item
    assert left(common_pb2.Condition(achievement="eat_cow")) == {}
    assert implied_items([common_pb2.Condition(achievement="collect_wood")], common_pb2.WorldRules(), items) == {}
    # A sub-task starts with what every earlier one leaves (the largest count of each item).
    plan = planner_pb2.Plan(subtasks=[
        planner_pb2.SubTask(name="a", success=[common_pb2.Condition(achievement="collect_wood")]),
        planner_pb2.SubTask(name="b", success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood",
                                                                                                   count=3))]),
        planner_pb2.SubTask(name="c", success=[TABLE])])
    assert start_inventory(plan, plan.subtasks[0], rules, items) == []
    assert start_inventory(plan, plan.subtasks[2], rules, items) == [
        common_pb2.ItemCount(item="wood", count=max(3, wood_gift))]


# --- the RL sub-tasks of an iteration train together -------------------------------------------------------------
