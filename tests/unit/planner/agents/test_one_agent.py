"""The one agent (``--agents one``): its answer schema and prompt, from the recorded Describe (one call through the
real LLM client to a scripted OpenAI-compatible test double, and its answers handled on the real env server:
tests/integration/planner/agents/test_one_agent_served.py)."""

from __future__ import annotations

import json

import pytest
from one_agent_support import CODE_ANSWER as ANSWER
from one_agent_support import FIND_COW, GET_WOOD, RL
from pydantic import ValidationError

from rlgpt.v1 import planner_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.agents.one_answers import AnsweredPlan
from services.planner.agents.one_schema import one_schema
from services.planner.prompts import PROMPT_DIR, idle_and_moves
from services.planner.schemas import rl_schema

# --- the schema -----------------------------------------------------------------------------------------


def test_schema_accepts_a_plan_with_its_code_and_configs(describe) -> None:
    answer = one_schema(describe, ()).model_validate({**ANSWER, "subtasks": [
        {**GET_WOOD, "name": "Get Wood"}, {**FIND_COW, "code": None}]})
    assert [st.name for st in answer.subtasks] == ["get_wood", "find_cow"]  # names are snake_cased, as in a plan
    assert answer.subtasks[0].code == COLLECT_WOOD and answer.subtasks[1].rl.episode_length == 300
    schema = json.dumps(one_schema(describe, ()).model_json_schema())
    assert "collect_diamond" in schema and "make_iron_sword" in schema  # achievements and actions are enums


@pytest.mark.parametrize(("subtask", "needle"), [
    ({**GET_WOOD, "code": None}, "'get_wood' has decision \"code\" but no \"code\""),
    ({k: v for k, v in FIND_COW.items() if k != "rl"}, "'find_cow' has decision \"rl\" but no \"rl\""),
    ({**GET_WOOD, "code": "yield"}, "at least 10 characters"),
    ({**FIND_COW, "rl": {**RL, "primitive_actions": ["teleport"]}}, "primitive_actions"),
    ({**FIND_COW, "rl": {**RL, "reward_terms": [{"kind": "joy", "weight": 1}]}}, "kind"),
    ({**FIND_COW, "success": [{"achievement": "fly_to_moon"}]}, "achievement"),
    ({**FIND_COW, "decision": "learn"}, "decision"),
    ({**FIND_COW, "rl": {**RL, "skills": ["get_wood"]}}, "skills"),  # not in the library: not offered
])


def test_schema_refuses_a_subtask_without_its_answer_or_with_unknown_names(describe, subtask, needle) -> None:
    with pytest.raises(ValidationError) as info:
        one_schema(describe, ()).model_validate({"rationale": "x", "subtasks": [subtask]})
    assert needle in str(info.value)


def test_code_only_schema_refuses_rl(describe) -> None:
    schema = one_schema(describe, (), allow_rl=False)
    with pytest.raises(ValidationError, match="decision"):
        schema.model_validate(ANSWER)
    assert "rl" not in json.dumps(schema.model_json_schema()["$defs"]["SubTask"]["properties"])
    schema.model_validate({**ANSWER, "subtasks": [GET_WOOD]})


def test_offered_skills_are_the_schemas_skill_names(describe) -> None:
    schema = one_schema(describe, ("get_wood",))
    answer = schema.model_validate({**ANSWER, "subtasks": [GET_WOOD, {**FIND_COW, "rl": {**RL, "skills": ["get_wood"]},
                                                                      "skills": ["get_wood"]}]})
    assert answer.subtasks[1].rl.skills == ["get_wood"]


# --- one call -------------------------------------------------------------------------------------------


# --- the answers, served --------------------------------------------------------------------------------
# --- revisions and resume -------------------------------------------------------------------------------


# --- the prompt, as a model reads it ---------------------------------------------------------------------
def test_the_templates_rl_example_is_a_valid_config(describe) -> None:
    lines = (PROMPT_DIR / "one_agent.txt").read_text().splitlines()
    example = lines[next(i for i, line in enumerate(lines) if line.startswith("Example of an \"rl\"")) + 1]
    config = rl_schema(describe, ()).model_validate(json.loads(example.replace("{idle_and_moves}",
                                                                               idle_and_moves(describe))))
    assert {t.kind for t in config.reward_terms} <= set(describe.reward_kinds)
    answer_form = lines[next(i for i, line in enumerate(lines) if line.startswith("The answer's form")) + 2]
    assert set(json.loads(answer_form)) == {"rationale", "subtasks"}  # the form is JSON (with placeholders)


def test_an_answered_plan_shows_its_rl_answers_inline() -> None:
    plan = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="find_cow", decision=planner_pb2.DECISION_RL)])
    text = AnsweredPlan(plan, rl={"find_cow": RL}).answer_text()
    assert json.loads(text)["subtasks"][0]["rl"] == RL
