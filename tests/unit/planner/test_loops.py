"""Pure helpers of the two loops (the loops themselves run against real services in tests/integration)."""

from __future__ import annotations

from types import SimpleNamespace

from rlgpt.prompts import shorten
from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.loops import TwoLoops, implied_items, training_frames
from services.planner.state import RunState, SubTaskState


def test_training_frames_leave_a_share_for_later_rl_subtasks() -> None:
    assert training_frames(15000, None, 3) == 15000  # no run budget: the per-training budget
    assert training_frames(15000, 60000, 0) == 15000
    assert training_frames(15000, 30000, 1) == 15000  # half of what is left
    assert training_frames(15000, 20000, 1) == 10000
    assert training_frames(15000, 30000, 2) == 10000
    assert training_frames(15000, 9000, 0) == 9000  # the last sub-task takes what is left


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


def test_shorten_keeps_whole_sentences() -> None:
    feedback = ("The skill never found a tree in 3 of 4 episodes. It walked into water and turned back, again and "
                "again, for 200 frames. Explore when no tree is seen.")
    cut = shorten(feedback, 90)
    assert cut == "The skill never found a tree in 3 of 4 episodes. ..."
    assert shorten(feedback, 1000) == feedback
    words = shorten("a" * 10 + " " + "b" * 100, 40)
    assert words == "a" * 10 + " ..."
    assert len(shorten("x" * 100, 20)) <= 20


def test_the_slow_agents_summary_never_cuts_feedback_mid_sentence() -> None:
    feedback = "First sentence is here. " * 30 + "Last one."
    state = RunState(subtasks={"a": SubTaskState(name="a", status="failed", decision="rl", feedback=feedback)})
    loops = SimpleNamespace(state=state)
    text = TwoLoops._summary(loops, planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="a")]))
    assert text.startswith("- a (rl): failed, success 0%; First sentence is here.")
    assert text.endswith("First sentence is here. ...") and len(text) < 500
