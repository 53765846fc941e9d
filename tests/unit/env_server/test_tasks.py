import pytest

from rlgpt.errors import InvalidArgument, NotFound
from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.backends.crafter import CrafterBackend
from services.env_server.tasks import parse_reward_terms, parse_stages, parse_task, step_reward

SPEC = CrafterBackend.spec


def test_achievement_name_is_the_default_condition() -> None:
    task = parse_task(common_pb2.TaskSpec(name="make_wood_pickaxe"), SPEC)
    assert task.achievements == ("make_wood_pickaxe",)
    assert not task.holds(set(), {}) and task.holds({"make_wood_pickaxe"}, {})


def test_inventory_threshold_and_start_inventory() -> None:
    task = parse_task(common_pb2.TaskSpec(
        name="three_stone", success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="stone", count=3))],
        start_inventory=[common_pb2.ItemCount(item="wood_pickaxe", count=1)]), SPEC)
    assert task.start_inventory == (("wood_pickaxe", 1),)
    assert task.holds(set(), {"stone": 3}) and not task.holds(set(), {"stone": 2})


def test_all_task_problems_in_one_error() -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_task(common_pb2.TaskSpec(success=[
            common_pb2.Condition(achievement="fly"),
            common_pb2.Condition(inventory=common_pb2.ItemCount(item="gold", count=0))],
            start_inventory=[common_pb2.ItemCount(item="laser", count=1)]), SPEC)
    text = str(info.value)
    assert "'fly'" in text and "'gold'" in text and "count 0" in text and "'laser'" in text


def test_unknown_task_name_without_conditions() -> None:
    with pytest.raises(NotFound, match="no task 'build_rocket' on crafter: crafter offers crafter"):
        parse_task(common_pb2.TaskSpec(name="build_rocket"), SPEC)


def test_stages_are_parsed_and_judged_like_tasks() -> None:
    stages = parse_stages([
        env_pb2.Stage(success=[common_pb2.Condition(achievement="collect_wood"),
                               common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=2))]),
        env_pb2.Stage()], SPEC)
    assert stages[0].holds({"collect_wood"}, {"wood": 2}) and not stages[0].holds({"collect_wood"}, {"wood": 1})
    assert not stages[1].holds({"collect_wood"}, {"wood": 9})  # no conditions: never done
    with pytest.raises(InvalidArgument) as info:
        parse_stages([env_pb2.Stage(), env_pb2.Stage(success=[common_pb2.Condition(achievement="fly"),
                                                              common_pb2.Condition()])], SPEC)
    assert "stages[1].success[0]: unknown achievement 'fly'" in str(info.value)
    assert "stages[1].success[1]: empty condition" in str(info.value)


def test_reward_vocabulary() -> None:
    terms = parse_reward_terms([
        common_pb2.RewardTerm(kind="inventory_gain", target="wood", weight=0.5),
        common_pb2.RewardTerm(kind="step", weight=-0.01),
        common_pb2.RewardTerm(kind="success", weight=10),
        common_pb2.RewardTerm(kind="achievement", target="*", weight=1)], SPEC)
    r = step_reward(terms, native=0, newly_unlocked={"collect_wood"}, gained={"wood": 2}, health_delta=0,
                    died=False, just_succeeded=True)
    assert r == pytest.approx(1.0 - 0.01 + 10 + 1)
    assert parse_reward_terms([], SPEC)[0].kind == "native"


def test_bad_reward_terms() -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_reward_terms([common_pb2.RewardTerm(kind="vibes"),
                            common_pb2.RewardTerm(kind="inventory_gain", target="gold"),
                            common_pb2.RewardTerm(kind="step", target="x"),
                            common_pb2.RewardTerm(kind="step", weight=float("nan"))], SPEC)
    text = str(info.value)
    assert "vibes" in text and "gold" in text and "takes no target" in text and "finite" in text
