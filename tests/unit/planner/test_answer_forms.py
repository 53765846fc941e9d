"""Answers as protos: plan names corrected and kept apart, macro actions' registered names."""

from __future__ import annotations

import re

from rlgpt.v1 import env_pb2
from services.planner.answer_forms import macro_short_name, macro_skill_name, plan_to_proto
from services.planner.schemas import plan_schema


def test_plan_names_are_coerced_to_snake_case_and_repeats_kept_apart() -> None:
    """A small model copies the form's "<snake_case name>" placeholder: corrected, and two copies stay two."""
    describe = env_pb2.DescribeResponse(achievements=["collect_wood"], items=["wood"])
    schema = plan_schema(describe, ())
    step = {"name": "<snake_case name>", "description": "d", "success": [{"achievement": "collect_wood"}],
            "decision": "code", "skills": []}
    plan = plan_to_proto(schema.model_validate({"rationale": "r", "subtasks": [step, step]}), 0)
    assert [s.name for s in plan.subtasks] == ["snake_case_name", "snake_case_name_2"]
    assert plan.rationale == "r"
    copied = plan_to_proto(schema.model_validate({"rationale": " <why this chain and these decisions>",
                                                  "subtasks": [step]}), 0)
    assert copied.rationale == ""  # the form's placeholder says nothing: dropped, not shown in the report


def test_macro_actions_get_names_of_their_sub_task_within_the_env_servers_rules() -> None:
    assert macro_skill_name("get_wood", "turn_around") == "get_wood__turn_around"
    long = macro_skill_name("s" * 48, "m" * 48)
    assert len(long) == 64 and long.endswith("__" + "m" * 30) and re.fullmatch(r"[a-z][a-z0-9_]{0,63}", long)
    assert macro_skill_name("x", "walk", {"x__walk"}) == "x__walk_2"
    assert macro_skill_name("x", "walk", {"x__walk", "x__walk_2"}) == "x__walk_3"
    for subtask, name in [("get_wood", "turn_around"), ("s" * 48, "m" * 30), ("a_b", "c_d")]:
        assert macro_short_name(subtask, macro_skill_name(subtask, name)) == name
