"""Skill programs: the schema built from a real env server's Describe, the checks that name a step, the compiled
code run by real Crafter through RunSkill, and the fast agent writing programs through the LLM client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlgpt.llm.local_server import MODEL_ALIAS
from rlgpt.v1 import common_pb2, env_pb2
from services.planner.agents.slow import SlowAgent
from services.planner.program_writer import resolve_skill_format
from services.planner.programs import (
    MAX_PROGRAM_STEPS,
    ProgramError,
    Vocabulary,
    check_program,
    program_schema,
    program_steps,
    programs_supported,
)
from services.planner.skill_library import SkillLibrary

ACHIEVED = [common_pb2.Condition(achievement="make_wood_pickaxe")]


def parse(describe: env_pb2.DescribeResponse, steps: list[dict]) -> list[dict]:
    schema = program_schema(Vocabulary.of(describe))
    return program_steps(schema.model_validate({"steps": steps}))


def test_every_name_is_an_enum_of_the_served_rules(describe) -> None:
    vocabulary = Vocabulary.of(describe)
    rules = describe.rules
    assert set(vocabulary.collect) == {c.item for r in rules.collect for c in r.receives} & set(describe.items)
    assert set(vocabulary.make) == {r.item for r in rules.make}
    assert set(vocabulary.place) == {r.item for r in rules.place}
    text = json.dumps(program_schema(vocabulary).model_json_schema())
    for name in (*vocabulary.collect, *vocabulary.materials, *describe.actions, *describe.achievements):
        assert f'"{name}"' in text
    # A make step can only name what a make rule makes (the schema, so constrained decoding, knows it).
    with pytest.raises(ValidationError, match="wood_pickaxe"):
        parse(describe, [{"op": "make", "item": "wood"}])


@pytest.mark.parametrize(("steps", "says"), [
    ([{"op": "fly", "to": "moon"}], "does not match any of the expected tags"),  # unknown op
    ([{"op": "collect", "item": "gold", "count": 1}], "collect.item"),  # unknown argument value
    ([{"op": "go_to", "target": "tree", "speed": 3}], "go_to.speed"),  # unknown argument
    ([], "at least 1 item"),  # empty program
    ([{"op": "act", "action": "noop", "times": 1}] * 1000, f"at most {MAX_PROGRAM_STEPS} items"),
])
def test_bad_programs_are_refused_by_the_schema_with_what_is_wrong(describe, steps, says) -> None:
    schema = program_schema(Vocabulary.of(describe))
    with pytest.raises(ValidationError, match=says):
        schema.model_validate({"steps": steps})


def test_a_repeat_of_more_steps_than_there_are_is_corrected_or_refused(describe) -> None:
    steps = parse(describe, [{"op": "repeat", "last": 2, "times": 2}, {"op": "collect", "item": "wood", "count": 1},
                             {"op": "repeat", "last": 3, "times": 2}])
    assert steps == [{"op": "collect", "item": "wood", "count": 1}, {"op": "repeat", "last": 1, "times": 2}]
    raw = [{"op": "collect", "item": "wood", "count": 1}, {"op": "repeat", "last": 3, "times": 2}]
    with pytest.raises(ProgramError, match=r"step 2 .*only 1 steps come before it"):
        check_program(raw, describe.rules, list(describe.actions))  # what reaches the check unparsed


def test_out_of_range_numbers_are_corrected_not_fatal(describe) -> None:
    steps = parse(describe, [{"op": "collect", "item": "wood", "count": 0},
                             {"op": "act", "action": "do", "times": 5000, "until": {"item": "wood", "count": 99}},
                             {"op": "repeat", "last": 0, "times": -3}])
    assert [steps[0]["count"], steps[1]["times"], steps[1]["until"]["count"], steps[2]["last"], steps[2]["times"]] \
        == [1, 200, 9, 1, 1]
    # Two conditions at once: the item count is kept; none at all: the action runs `times` times.
    both, neither = parse(describe, [
        {"op": "act", "action": "do", "times": 5, "until": {"achievement": "collect_wood", "item": "wood"}},
        {"op": "act", "action": "do", "times": 5, "until": {}}])
    assert both["until"] == {"item": "wood", "count": 1} and "until" not in neither


@pytest.mark.parametrize(("steps", "says"), [
    ([{"op": "act", "action": "noop", "times": 50, "until": {"achievement": "collect_wood"}}],
     r"step 1 \(act noop until collect_wood\): doing noop never gets collect_wood; by the rules it comes from do"),
])
def test_programs_that_cannot_work_name_the_step_and_what_to_change(describe, steps, says) -> None:
    with pytest.raises(ProgramError, match=says):
        check_program(parse(describe, steps), describe.rules, list(describe.actions))


def test_repeats_past_the_step_limit_are_cut_to_what_fits_and_the_check_still_refuses_raw_ones(describe) -> None:
    raw = [{"op": "act", "action": "noop", "times": 1}, {"op": "repeat", "last": 1, "times": 9},
           {"op": "repeat", "last": 2, "times": 9}, {"op": "repeat", "last": 3, "times": 9}]
    steps = parse(describe, raw)  # sizes 1, 9, 90 (10 x 9); then 100 x 9 is cut to 100 x 1: 200 in all
    assert [s.get("times") for s in steps] == [1, 9, 9, 1]
    check_program(steps, describe.rules, list(describe.actions))
    assert len(parse(describe, [*raw[:3], {"op": "repeat", "last": 3, "times": 9},
                                {"op": "repeat", "last": 1, "times": 2}])) == 4  # nothing fits: dropped
    with pytest.raises(ProgramError, match=r"step 4 .*more than 200 steps; repeat fewer steps or fewer times"):
        check_program(raw, describe.rules, list(describe.actions))  # what reaches the check unparsed


def test_auto_writes_programs_for_the_embedded_models_only(describe) -> None:
    assert resolve_skill_format("auto", MODEL_ALIAS, describe) == "program"
    assert resolve_skill_format("auto", "gemma3-270m", describe) == "program"
    assert resolve_skill_format("auto", "gpt-4o-mini", describe) == "python"
    assert resolve_skill_format("program", "gpt-4o-mini", describe) == "program"
    assert resolve_skill_format("python", MODEL_ALIAS, describe) == "python"
    # A backend whose skill API has no map memory or routes (MineDojo's) cannot run programs: Python.
    no_map = env_pb2.DescribeResponse()
    no_map.CopyFrom(describe)
    no_map.skill_api = "agent.actions -> tuple\nagent.steps -> int"
    assert not programs_supported(no_map) and programs_supported(describe)
    assert resolve_skill_format("program", MODEL_ALIAS, no_map) == "python"


def test_a_programs_names_are_its_subtasks_prerequisites(describe) -> None:
    vocabulary = Vocabulary.of(describe)
    wood = vocabulary.narrowed(describe.rules, [common_pb2.Condition(achievement="collect_wood")],
                               list(describe.actions))
    assert (wood.collect, wood.place, wood.make, wood.materials, wood.actions) == \
        (("wood",), (), (), ("tree",), ("do",))
    stone = vocabulary.narrowed(describe.rules, [common_pb2.Condition(achievement="collect_stone")],
                                list(describe.actions))
    assert set(stone.collect) == {"stone", "wood"} and stone.make == ("wood_pickaxe",) and stone.place == ("table",)
    # No rule covers eating a cow: every name stays.
    assert vocabulary.narrowed(describe.rules, [common_pb2.Condition(achievement="eat_cow")],
                               list(describe.actions)) == vocabulary


def test_plans_held_to_the_rules_name_only_the_goals_prerequisites(describe) -> None:
    """A base model copied the answer form's "<snake_case name>" as sub-task names; with closed names it cannot."""
    library = SkillLibrary(Path("/nonexistent/lib.json"))
    task = common_pb2.TaskSpec(name="make_wood_pickaxe", success=ACHIEVED)
    _, schema = SlowAgent(None, describe, library, closed_names=True).prompt(task)
    names = schema.model_json_schema()["$defs"]["SubTask"]["properties"]["name"]["enum"]
    assert set(names) == {"collect_wood", "place_table", "make_wood_pickaxe"}
    with pytest.raises(ValidationError, match=r"subtasks\.0\.name\n  Input should be .collect_wood."):
        schema.model_validate({"rationale": "", "subtasks": [
            {"name": "snake_case_name", "description": "", "success": [{"achievement": "collect_wood"}],
             "decision": "code"}]})
    _, told = SlowAgent(None, describe, library, closed_names=True).prompt(task, feedback="died of thirst: "
                                                                               "add collect_drink first")
    told_names = told.model_json_schema()["$defs"]["SubTask"]["properties"]["name"]["enum"]
    assert set(told_names) == {"collect_drink", "collect_wood", "place_table", "make_wood_pickaxe"}  # the critic's need
    _, free = SlowAgent(None, describe, library).prompt(task)
    assert "enum" not in free.model_json_schema()["$defs"]["SubTask"]["properties"]["name"]
