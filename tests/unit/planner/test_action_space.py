"""The action-space and reward completion rules: the actions a condition needs, read from the rules, and the success
term a config always gets."""

from __future__ import annotations

import pytest

from rlgpt.v1 import common_pb2, learner_pb2
from services.planner.action_space import SUCCESS_REWARD, actions_for, complete_action_space, complete_reward


@pytest.mark.parametrize(("condition", "needed"), [
    (common_pb2.Condition(achievement="place_furnace"), ["place_furnace"]),  # a place rule
    (common_pb2.Condition(achievement="collect_drink"), ["do"]),  # a collect rule
    (common_pb2.Condition(inventory=common_pb2.ItemCount(item="stone_pickaxe", count=1)), ["make_stone_pickaxe"]),
    # No rule unlocks these: the actions the rules' facts quote beside them, else the collecting action.
    (common_pb2.Condition(achievement="wake_up"), ["sleep"]),
    (common_pb2.Condition(achievement="eat_cow"), ["do"]),
    (common_pb2.Condition(achievement="defeat_zombie"), ["do"]),
])
def test_the_actions_a_condition_needs_come_from_the_rules(describe, condition, needed) -> None:
    assert actions_for(condition, describe.rules, list(describe.actions)) == needed
    assert actions_for(condition, common_pb2.WorldRules(), list(describe.actions)) == \
        ([condition.achievement] if condition.achievement in describe.actions else [])  # no rules: no guess


@pytest.mark.parametrize(("terms", "expected", "says"), [
    # Gemma 3 270M's make_wood_pickaxe answer: nothing paid the goal, training stayed at chance.
    ([("health", "", 0.0), ("death", "", -1.0)], [("death", "", -1.0), ("success", "", SUCCESS_REWARD)],
     "dropped 1 term(s) of weight 0; added success"),
    ([("achievement", "collect_wood", -1.0)], [("achievement", "collect_wood", -1.0), ("success", "", SUCCESS_REWARD)],
     "added success"),
    ([("achievement", "collect_stone", 1.0)], [("achievement", "collect_stone", 1.0), ("success", "", SUCCESS_REWARD)],
     "added success"),
    ([("achievement", "make_wood_pickaxe", 2.0)], [("achievement", "make_wood_pickaxe", 2.0)], ""),
    ([("inventory_gain", "*", 0.5)], [("inventory_gain", "*", 0.5)], ""),
    ([("native", "", 1.0), ("step", "", -0.01)], [("native", "", 1.0), ("step", "", -0.01)], ""),
    ([("success", "", 1.0)], [("success", "", 1.0)], ""),
])
def test_a_config_is_always_paid_for_its_sub_tasks_success(terms, expected, says) -> None:
    config = learner_pb2.RLConfig(task=common_pb2.TaskSpec(success=[
        common_pb2.Condition(achievement="make_wood_pickaxe"), common_pb2.Condition(
            inventory=common_pb2.ItemCount(item="wood", count=1))]),
        reward_terms=[common_pb2.RewardTerm(kind=k, target=t, weight=w) for k, t, w in terms])
    assert complete_reward(config).startswith(says) if says else complete_reward(config) == ""
    assert [(t.kind, t.target, pytest.approx(t.weight)) for t in config.reward_terms] == expected


def test_complete_action_space_adds_moves_and_what_the_goal_needs(describe) -> None:
    config = learner_pb2.RLConfig(primitive_actions=["do"], task=common_pb2.TaskSpec(
        success=[common_pb2.Condition(achievement="place_table")]))
    added = complete_action_space(config, describe)
    assert added == ["move_left", "move_right", "move_up", "move_down", "place_table"]
    assert list(config.primitive_actions) == ["do", *added]
    everything = learner_pb2.RLConfig(task=config.task)  # empty means every action: nothing to add
    assert complete_action_space(everything, describe) == []
    assert not everything.primitive_actions
