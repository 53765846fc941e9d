"""The one agent in program form (``--agents one`` with a small model, RLGPT_SKILL_FORMAT=program): closed names,
a skill program per coded sub-task and an RL config per learned one, told apart by the decision in the schema (the
answers served through the real LLM client and env server: tests/integration/planner/agents)."""

from __future__ import annotations

import json

import pytest
from one_agent_support import CODED, LEARNED
from one_agent_support import PROGRAM_ANSWER as ANSWER
from pydantic import ValidationError

from rlgpt.v1 import common_pb2
from services.planner.agents.one_schema import one_schema

TASK = common_pb2.TaskSpec(name="make_wood_pickaxe", success=[common_pb2.Condition(achievement="make_wood_pickaxe")])


def test_the_decision_picks_the_part_a_subtask_must_carry(describe) -> None:
    schema = one_schema(describe, (), programs_for=TASK)
    answer = schema.model_validate(ANSWER)
    assert answer.subtasks[0].program[0].item == "wood" and answer.subtasks[1].rl.episode_length == 300
    doc = json.dumps(schema.model_json_schema())
    assert '"discriminator"' in doc and "CodedSubTask" in doc and "LearnedSubTask" in doc  # a grammar can follow it
    coded = schema.model_json_schema()["$defs"]["CodedSubTask"]
    assert "code" not in coded["properties"] and {"program", "decision"} <= set(coded["required"])
    rl = schema.model_json_schema()["$defs"]["RLConfig"]["properties"]
    assert set(rl) == {"primitive_actions", "skills", "skill_max_steps", "reward_terms", "episode_length"}  # no code


@pytest.mark.parametrize(("subtask", "needle"), [
    ({k: v for k, v in CODED.items() if k != "program"}, "subtasks.0.code.program\n  Field required"),
    ({k: v for k, v in LEARNED.items() if k != "rl"}, "subtasks.0.rl.rl\n  Field required"),
    ({**LEARNED, "decision": "learn"}, "decision"),
    ({**CODED, "name": "snake_case_name"}, "name"),  # a copied placeholder is no name: names are closed
    ({**CODED, "success": [{"achievement": "collect_diamond"}]}, "achievement"),  # not a prerequisite
    ({**CODED, "program": [{"op": "collect", "item": "diamond", "count": 1}]}, "item"),
    ({**CODED, "program": []}, "program"),
])


def test_program_form_refuses_a_missing_part_or_a_name_outside_the_task(describe, subtask, needle) -> None:
    with pytest.raises(ValidationError) as info:
        one_schema(describe, (), programs_for=TASK).model_validate({"rationale": "x", "subtasks": [subtask, LEARNED]})
    assert needle in str(info.value)


def test_code_only_program_form_has_no_rl(describe) -> None:
    schema = one_schema(describe, (), allow_rl=False, programs_for=TASK)
    with pytest.raises(ValidationError, match="decision"):
        schema.model_validate(ANSWER)
    schema.model_validate({**ANSWER, "subtasks": [CODED, {**CODED, "name": "make_wood_pickaxe",
                                                          "success": LEARNED["success"]}]})


