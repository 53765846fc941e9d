"""The agents' answer schemas: enums from the env's Describe, snake_case names, clamps, what validation refuses, and
answers of them as protos and back (services/planner/answer_forms.py)."""

from __future__ import annotations

import json

import pydantic
import pytest

from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.answer_forms import (
    rl_config_answer,
    rl_config_to_proto,
)
from services.planner.schemas import (
    plan_schema,
    rl_schema,
)


def test_the_enums_are_the_env_servers_own_names(env_server) -> None:
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    plan = plan_schema(describe, ("zeta_skill", "alpha_skill")).model_json_schema()
    plan_defs = plan["$defs"]
    condition = plan_defs["Condition"]["properties"]
    assert condition["achievement"]["anyOf"][0]["enum"] == list(describe.achievements)
    assert condition["item"]["anyOf"][0]["enum"] == list(describe.items)
    assert plan_defs["SubTask"]["properties"]["skills"]["items"]["enum"] == ["alpha_skill", "zeta_skill"]
    rl = rl_schema(describe, ("alpha_skill",)).model_json_schema()
    assert rl["properties"]["primitive_actions"]["items"]["enum"] == list(describe.actions)
    assert rl["properties"]["primitive_actions"]["maxItems"] == len(describe.actions)
    term = rl["$defs"]["RewardTerm"]["properties"]
    assert term["kind"]["enum"] == [k for k in describe.reward_kinds if k != "stage"]  # a kept plan's own term
    assert term["target"]["enum"] == ["", "*", *dict.fromkeys([*describe.achievements, *describe.items])]
    only_skill = rl["properties"]["skills"]["items"]
    assert only_skill.get("enum", [only_skill.get("const")]) == ["alpha_skill"]  # one name: a const
    assert json.loads(json.dumps([plan, rl])) == [plan, rl]  # plain JSON, as sent to the LLM server


RL_ANSWER = {"primitive_actions": ["do", "noop", "do"], "skills": [], "skill_max_steps": 8,
             "reward_terms": [{"kind": "success", "target": "wood", "weight": 1.0},
                              {"kind": "inventory_gain", "target": "wood", "weight": 0.5}],
             "episode_length": 400}


def test_an_rl_answer_chooses_what_the_policy_observes_and_whether_success_ends_an_episode(env_server) -> None:
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    schema = rl_schema(describe, ())
    subtask = planner_pb2.SubTask(name="get_wood", success=[common_pb2.Condition(achievement="collect_wood")])
    chosen = {**RL_ANSWER, "observe": ["status", "inventory/wood", "status"], "end_on_success": True,
              "reward_terms": [{"kind": "success", "target": None, "weight": 1}]}  # null target: none
    config = rl_config_to_proto(schema.model_validate(chosen), subtask, env_frames=5000, seed=7)
    assert list(config.observe) == ["status", "inventory/wood"] and config.task.terminate_on_success
    assert config.reward_terms[0].target == ""
    assert rl_config_to_proto(schema.model_validate(rl_config_answer(config)), subtask, 5000, 7) == config
    plain = rl_config_to_proto(schema.model_validate(RL_ANSWER), subtask, env_frames=5000, seed=7)
    assert list(plain.observe) == [] and not plain.task.terminate_on_success  # the defaults: all, episodes go on
    with pytest.raises(pydantic.ValidationError, match="observe"):
        schema.model_validate({**RL_ANSWER, "observe": ["mood"]})


