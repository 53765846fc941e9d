"""The agents' answer schemas: enums from the env's Describe, snake_case names, clamps, what validation refuses, and
answers of them as protos and back (services/planner/answer_forms.py)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.answer_forms import (
    macro_actions_of,
    plan_answer,
    plan_to_proto,
    rl_config_answer,
    rl_config_to_proto,
)
from services.planner.schemas import (
    MAX_MACRO_ACTIONS,
    MAX_SUBTASKS,
    MIN_ENV_FRAMES,
    SkillAnswer,
    plan_schema,
    rl_schema,
    snake_name,
)

SMALL = env_pb2.DescribeResponse(backend="crafter", actions=["noop", "move_left", "do", "place_table"],
                                 achievements=["collect_wood", "place_table"], items=["wood", "sapling"],
                                 reward_kinds=["success", "achievement", "inventory_gain", "step"], stack_limit=9)
STEP = {"name": "get_wood", "description": "collect wood", "success": [{"item": "wood", "count": 2}],
        "decision": "code", "skills": []}


def plan_of(*steps: dict[str, Any], skills: tuple[str, ...] = ()) -> pydantic.BaseModel:
    return plan_schema(SMALL, skills).model_validate({"rationale": "r", "subtasks": list(steps)})


def test_without_skills_the_skills_field_is_an_empty_list_never_free_text() -> None:
    for schema in (plan_schema(SMALL, ()).model_json_schema()["$defs"]["SubTask"],
                   rl_schema(SMALL, ()).model_json_schema()):
        assert schema["properties"]["skills"]["maxItems"] == 0
    with pytest.raises(pydantic.ValidationError, match="skills"):
        plan_of({**STEP, "skills": ["anything"]})


@pytest.mark.parametrize(("value", "name"), [
    ("<Get Sand>", "get_sand"), ("Collect Wood!!", "collect_wood"), ("3rd step", "rd_step"),
    ("place-table", "place_table"), ("a" * 60, "a" * 48), ("x_" * 30, "x_" * 23 + "x"), ("get_wood", "get_wood")])
def test_snake_name_corrects_a_models_stray_characters(value: str, name: str) -> None:
    assert snake_name(value) == name
    assert plan_of({**STEP, "name": value}).subtasks[0].name == name


@pytest.mark.parametrize("value", ["___", "", "123", "!!"])
def test_what_cannot_become_a_name_is_a_validation_error(value: str) -> None:
    assert snake_name(value) == value  # left as it was, for validation to report
    with pytest.raises(pydantic.ValidationError, match="string_pattern_mismatch"):
        plan_of({**STEP, "name": value})
    with pytest.raises(pydantic.ValidationError, match="name"):
        SkillAnswer.model_validate({"name": value, "description": "d", "code": "def skill(agent): yield 'do'"})
    assert snake_name(7) == 7  # not a string: not touched


def test_a_plans_out_of_range_count_is_corrected_not_fatal() -> None:
    plan = plan_of({**STEP, "success": [{"item": "wood", "count": 20}]}, {**STEP, "name": "more", "success": [
        {"item": "wood", "count": 0}]})
    assert [st.success[0].count for st in plan.subtasks] == [9, 1]  # the inventory holds at most 9 (stack_limit)
    unlimited = plan_schema(env_pb2.DescribeResponse(items=["wood"], achievements=["collect_wood"]), ())
    twenty = {**STEP, "success": [{"item": "wood", "count": 20}]}
    big = unlimited.model_validate({"rationale": "r", "subtasks": [twenty]})
    assert big.subtasks[0].success[0].count == 20  # an env that names no stack limit bounds no count


@pytest.mark.parametrize(("change", "where"), [
    ({"success": [{"achievement": "fly_to_moon"}]}, "subtasks.0.success.0.achievement"),
    ({"success": [{"item": "diamond", "count": 1}]}, "subtasks.0.success.0.item"),
    ({"success": [{"achievement": "collect_wood", "item": "wood"}]}, "exactly one of `achievement` or `item`"),
    ({"success": [{}]}, "exactly one of `achievement` or `item`"),
    ({"success": []}, "subtasks.0.success"),
    ({"decision": "maybe"}, "subtasks.0.decision"),
    ({"description": "d" * 401}, "subtasks.0.description"),
])
def test_plan_validation_errors_name_the_field(change: dict[str, Any], where: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        plan_of({**STEP, **change})
    assert where in str(info.value)


def test_a_plan_has_one_to_max_subtasks() -> None:
    with pytest.raises(pydantic.ValidationError, match="subtasks"):
        plan_of()
    with pytest.raises(pydantic.ValidationError, match=f"at most {MAX_SUBTASKS} items"):
        plan_of(*[STEP] * (MAX_SUBTASKS + 1))
    assert len(plan_of(*[STEP] * MAX_SUBTASKS).subtasks) == MAX_SUBTASKS


def test_plan_to_proto_and_plan_answer_are_inverses() -> None:
    answer = plan_of(STEP, {**STEP, "name": "cow", "decision": "rl", "success": [{"achievement": "collect_wood"}],
                            "skills": ["chop"]}, {**STEP, "success": [{"item": "sapling"}]}, skills=("chop",))
    plan = plan_to_proto(answer, iteration=3)
    assert plan.iteration == 3 and plan.rationale == "r"
    assert [s.name for s in plan.subtasks] == ["get_wood", "cow", "get_wood_2"]  # a repeated name kept apart
    assert plan.subtasks[0].success[0].inventory == common_pb2.ItemCount(item="wood", count=2)
    assert plan.subtasks[2].success[0].inventory.count == 1  # no count: at least one
    assert plan.subtasks[1].decision == planner_pb2.DECISION_RL and list(plan.subtasks[1].skills) == ["chop"]
    again = plan_to_proto(plan_schema(SMALL, ("chop",)).model_validate(plan_answer(plan)), iteration=3)
    assert again == plan


RL_ANSWER = {"primitive_actions": ["do", "noop", "do"], "skills": [], "skill_max_steps": 8,
             "reward_terms": [{"kind": "success", "target": "wood", "weight": 1.0},
                              {"kind": "inventory_gain", "target": "wood", "weight": 0.5}],
             "episode_length": 400}


def test_rl_numbers_are_clamped_and_non_numbers_refused() -> None:
    model = rl_schema(SMALL, ())
    answer = model.model_validate({**RL_ANSWER, "skill_max_steps": 0, "episode_length": 99999,
                                   "reward_terms": [{"kind": "step", "weight": -50}]})
    assert (answer.skill_max_steps, answer.episode_length, answer.reward_terms[0].weight) == (1, 5000, -10)
    assert model.model_validate({**RL_ANSWER, "skill_max_steps": "300"}).skill_max_steps == 200
    with pytest.raises(pydantic.ValidationError, match="skill_max_steps"):
        model.model_validate({**RL_ANSWER, "skill_max_steps": "many"})
    with pytest.raises(pydantic.ValidationError, match=r"reward_terms\.0\.kind"):
        model.model_validate({**RL_ANSWER, "reward_terms": [{"kind": "happiness", "weight": 1}]})
    with pytest.raises(pydantic.ValidationError, match=r"primitive_actions\.0"):
        model.model_validate({**RL_ANSWER, "primitive_actions": ["fly"]})
    with pytest.raises(pydantic.ValidationError, match="primitive_actions"):
        model.model_validate({**RL_ANSWER, "primitive_actions": []})


def test_rl_config_to_proto_dedupes_actions_and_drops_stray_targets() -> None:
    subtask = planner_pb2.SubTask(name="get_wood", description="collect wood",
                                  success=[common_pb2.Condition(achievement="collect_wood")])
    config = rl_config_to_proto(rl_schema(SMALL, ()).model_validate(RL_ANSWER), subtask, env_frames=5000, seed=7)
    assert list(config.primitive_actions) == ["do", "noop"]
    assert [(t.kind, t.target, t.weight) for t in config.reward_terms] == [("success", "", 1.0),
                                                                         ("inventory_gain", "wood", 0.5)]
    assert (config.name, config.env_frames, config.seed, config.skill_max_steps, config.episode_length) == \
        ("get_wood", 5000, 7, 8, 400)
    assert list(config.task.success) == list(subtask.success) and config.task.description == "collect wood"
    again = rl_config_to_proto(rl_schema(SMALL, ()).model_validate(rl_config_answer(config)), subtask, 5000, 7)
    assert again == config


def test_the_name_pattern_reaches_the_llm_servers_schema() -> None:
    from rlgpt.llm.client import server_schema
    from services.planner.schemas import NAME_PATTERN, SkillAnswer

    assert server_schema(SkillAnswer)["properties"]["name"]["pattern"] == NAME_PATTERN
    assert SkillAnswer(name="<Get Sand>", description="d", code="def skill(agent): yield 'noop'").name == "get_sand"


MACRO = {"name": "Turn Around", "description": "turns to face the opposite way",
         "code": "def skill(agent):\n    yield 'move_left'\n"}


def test_rl_answers_may_write_up_to_three_macro_actions() -> None:
    model = rl_schema(SMALL, ())
    assert macro_actions_of(model.model_validate(RL_ANSWER)) == []  # optional: none by default
    answer = model.model_validate({**RL_ANSWER, "macro_actions": [MACRO, {**MACRO, "description": ""}]})
    assert [m.name for m in macro_actions_of(answer)] == ["turn_around", "turn_around"]  # snake_case, as skills
    assert macro_actions_of(answer)[0].code.startswith("def skill(agent):")
    macro_schema = model.model_json_schema()["$defs"]["MacroActionAnswer"]["properties"]
    assert macro_schema["code"]["maxLength"] == SkillAnswer.model_json_schema()["properties"]["code"]["maxLength"]
    assert model.model_json_schema()["properties"]["macro_actions"]["maxItems"] == MAX_MACRO_ACTIONS
    for bad, where in [([MACRO] * (MAX_MACRO_ACTIONS + 1), "macro_actions"),
                       ([{**MACRO, "description": "d" * 301}], r"macro_actions\.0\.description"),
                       ([{**MACRO, "code": "yield"}], r"macro_actions\.0\.code"),
                       ([{**MACRO, "code": "x" * 8001}], r"macro_actions\.0\.code"),
                       ([{**MACRO, "name": "!!"}], r"macro_actions\.0\.name"),
                       ([{"name": "x", "description": "d"}], r"macro_actions\.0\.code")]:
        with pytest.raises(pydantic.ValidationError, match=where):
            model.model_validate({**RL_ANSWER, "macro_actions": bad})


def test_an_rl_answer_may_ask_for_fewer_frames_never_more_than_offered() -> None:
    model = rl_schema(SMALL, ())
    subtask = planner_pb2.SubTask(name="get_wood")

    def trained(asked: object, offered: int) -> int:
        answer = model.model_validate({**RL_ANSWER, **({} if asked is None else {"env_frames": asked})})
        return rl_config_to_proto(answer, subtask, env_frames=offered, seed=0).env_frames

    assert trained(None, 20000) == 20000 and trained(0, 20000) == 20000  # nothing asked: the whole offer
    assert trained(5000, 20000) == 5000 and trained("6000", 20000) == 6000
    assert trained(10**7, 20000) == 20000  # the loop's offer stays the cap
    assert trained(10, 20000) == MIN_ENV_FRAMES and trained(-5, 20000) == MIN_ENV_FRAMES
    assert trained(5000, 1000) == 1000  # an offer below the minimum is still the cap
    with pytest.raises(pydantic.ValidationError, match="env_frames"):
        model.model_validate({**RL_ANSWER, "env_frames": "lots"})


def test_rl_config_answer_shows_the_configs_macro_actions_with_their_code() -> None:
    subtask = planner_pb2.SubTask(name="get_wood")
    model = rl_schema(SMALL, ("chop",))
    config = rl_config_to_proto(model.model_validate({**RL_ANSWER, "skills": ["chop"]}), subtask, 5000, 7)
    config.skills.append("get_wood__turn_around")  # registered by the attempt
    shown = rl_config_answer(config, {"get_wood__turn_around": MACRO["code"], "other__macro": "x"})
    assert shown["skills"] == ["chop"] and shown["env_frames"] == 5000
    assert shown["macro_actions"] == [{"name": "turn_around", "code": MACRO["code"]}]  # only the config's own
    again = model.model_validate(shown)  # still a valid answer
    assert [m.name for m in again.macro_actions] == ["turn_around"]
