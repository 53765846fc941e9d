"""A whole-game curriculum repaired from Crafter's rules as the env server generates them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_plan_rules import got, held

from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.env_server.describe import describe
from services.env_server.settings import EnvServerSettings
from services.planner.curriculum import aimed_at, curriculum_violations, repair_curriculum
from services.planner.game_task import GAME_OBJECTIVE
from services.planner.plan_rules import plan_violations

GAME = common_pb2.TaskSpec(name="crafter", objective=GAME_OBJECTIVE)


@pytest.fixture(scope="module")
def crafter() -> env_pb2.DescribeResponse:
    return describe("crafter", EnvServerSettings())


def plan(*subtasks: tuple[str, common_pb2.Condition], description: str = "") -> planner_pb2.Plan:
    return planner_pb2.Plan(rationale="<why this chain and these decisions>", subtasks=[
        planner_pb2.SubTask(name=name, description=description or f"the model's {name}", success=[c],
                            decision=planner_pb2.DECISION_RL) for name, c in subtasks])


def repair(crafter: env_pb2.DescribeResponse, p: planner_pb2.Plan, limit: int = 24) -> planner_pb2.Plan:
    return repair_curriculum(p, crafter.rules, set(crafter.achievements), set(crafter.items), limit=limit)


def conditions(p: planner_pb2.Plan) -> list[str]:
    return [c.achievement or f"{c.inventory.count} {c.inventory.item}" for st in p.subtasks for c in st.success]


# What the embedded model answered for the whole game (2026-11-29): achievement names paired with a condition they do
# not mean, one pair repeated to the limit, the answer form's placeholders copied.
EMBEDDED = plan(*[(name, held("coal", 1 if name == "collect_wood" or name.startswith("collect_iron") else 2))
                  for name in ["collect_wood", "collect_stone", "collect_iron"] + ["collect_stone", "collect_iron"] * 4
                  + ["collect_stone"]], description="<what to do, one sentence>")


def test_a_small_models_curriculum_becomes_the_rules_chain_toward_what_it_aimed_at(crafter) -> None:
    assert plan_violations(EMBEDDED, GAME, crafter.rules, set(crafter.items))  # broken as answered
    repaired = repair(crafter, EMBEDDED)
    assert aimed_at(EMBEDDED, set(crafter.achievements)) == ["collect_wood", "collect_stone", "collect_iron"]
    # collect_wood and collect_stone are unlocked on collect_iron's way (its 4 wood, its 1 stone)
    assert conditions(repaired) == ["4 wood", "place_table", "make_wood_pickaxe", "1 stone", "make_stone_pickaxe",
                                    "collect_iron"]
    assert "reached on another aim's way: collect_wood, collect_stone" in repaired.rationale
    assert plan_violations(repaired, GAME, crafter.rules, set(crafter.items)) == []
    names = [st.name for st in repaired.subtasks]
    assert len(set(names)) == len(names)
    assert not any("<" in st.description for st in repaired.subtasks)  # placeholders replaced by words
    assert repaired.subtasks[-1].description == "Unlock the achievement collect_iron."
    assert "<" not in repaired.rationale
    assert "aimed at (collect_wood, collect_stone, collect_iron)" in repaired.rationale


def test_the_models_own_steps_are_kept_each_achievement_once_items_again_where_used_up(crafter) -> None:
    model = plan(("wood", held("wood", 3)), ("table", got("place_table")), ("pickaxe", got("make_wood_pickaxe")),
                 ("sword", got("make_wood_sword")), ("drink", got("collect_drink")), ("table", got("place_table")))
    repaired = repair(crafter, model)
    # place_table is on the pickaxe's way; the model's steps toward it are kept
    assert [st.name for st in repaired.subtasks][:3] == ["wood", "table", "pickaxe"]
    assert all(st.decision == planner_pb2.DECISION_RL for st in repaired.subtasks[:3])
    assert conditions(repaired).count("place_table") == 1  # in one world a second table unlocks nothing
    assert conditions(repaired).count("3 wood") == 2  # the sword's wood again: the pickaxe used it up
    assert conditions(repaired).index("make_wood_sword") < conditions(repaired).index("collect_drink")
    assert plan_violations(repaired, GAME, crafter.rules, set(crafter.items)) == []


def test_an_aim_past_the_limit_is_left_out_and_said(crafter) -> None:
    model = plan(("stone", got("collect_stone")), ("diamond", got("collect_diamond")), ("drink", got("collect_drink")))
    repaired = repair(crafter, model, limit=6)
    assert "collect_diamond" not in conditions(repaired) and "collect_drink" in conditions(repaired)
    assert "left out (over 6 sub-tasks): collect_diamond" in repaired.rationale


def test_a_plan_that_aims_at_no_achievement_is_left_as_it_is(crafter) -> None:
    model = plan(("wood", held("wood", 3)))
    assert repair(crafter, model) is model


def planned(crafter: env_pb2.DescribeResponse, tmp_path: Path,
            answer: planner_pb2.Plan) -> tuple[Any, planner_pb2.Plan]:
    """The loops' plan for a game whose slow agent (a test double) answers ``answer`` every time, plans checked."""
    from test_coding_failed import ScriptedSlow
    from test_loops import rl_loops

    two, _ = rl_loops(tmp_path)
    two.ctx.run.request.task.CopyFrom(GAME)
    two.ctx.describe = crafter
    two.slow, two.check_plans = ScriptedSlow(answer), True
    return two, two._new_plan(None)


def test_a_game_plan_that_breaks_the_rules_twice_is_repaired_not_kept(crafter, tmp_path: Path) -> None:
    """The slow agent (a test double) answers the embedded model's curriculum twice: the planner asks once more with
    the violations, then plays the repaired curriculum, where it used to keep the broken one."""
    two, plan = planned(crafter, tmp_path, EMBEDDED)
    assert "Your plan breaks the game's rules" in two.slow.feedback[-1]
    assert len(two.slow.feedback) == 2
    assert conditions(plan)[-1] == "collect_iron" and "curriculum repaired from the rules" in plan.rationale


# The embedded model's second curriculum (2026-11-29, iteration 1): within the rules' order and amounts, yet a table
# placed twice and names that say one achievement while the conditions check another.
SECOND = plan(("make_wood_pickaxe", held("wood", 3)), ("place_table", got("place_table")),
              ("make_wood_pickaxe_2", held("wood", 3)), ("place_table_2", got("place_table")))


def test_a_curriculum_that_repeats_an_achievement_or_misnames_one_is_told_and_repaired(crafter) -> None:
    assert plan_violations(SECOND, GAME, crafter.rules, set(crafter.items)) == []  # the rules alone see nothing
    found = curriculum_violations(SECOND, set(crafter.achievements))
    assert found == [
        "sub-task 1 is named after achievement make_wood_pickaxe but its success conditions do not name it: give it "
        'the condition {"achievement": "make_wood_pickaxe"} or another name',
        "sub-task 4 (place_table_2) aims again at achievement place_table, which sub-task 2 already unlocks; in one "
        "episode it counts once: aim at another achievement or remove it"]
    repaired = repair(crafter, SECOND)
    assert conditions(repaired) == ["3 wood", "place_table", "make_wood_pickaxe"]
    assert curriculum_violations(repaired, set(crafter.achievements)) == []
    assert curriculum_violations(repair(crafter, EMBEDDED), set(crafter.achievements)) == []


def test_the_loop_tells_the_agent_a_curriculum_repeats_an_achievement_then_repairs_it(crafter, tmp_path: Path) -> None:
    two, plan = planned(crafter, tmp_path, SECOND)
    assert "aims again at achievement place_table" in two.slow.feedback[-1]
    assert conditions(plan) == ["3 wood", "place_table", "make_wood_pickaxe"]
