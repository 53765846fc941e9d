"""The kept-plan agent (the fast agent's part in RL around a kept plan): where the chain's failed episodes ended,
its answer schema, and its prompt and revision prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest
from kept_plan_support import FAILED, PICKAXE, PLAN, WALK, ScriptedLLM

from rlgpt.v1 import common_pb2, env_pb2
from services.planner.agents.fast import FastAgent
from services.planner.agents.kept_plan import KeptPlanRevision, kept_plan_prompt
from services.planner.schemas import SKILL_CODE_LIMITS, kept_plan_schema
from services.planner.skill_library import SkillLibrary


def test_the_schema_offers_the_envs_actions_and_no_kind_the_planner_pays_itself(env_server) -> None:
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    schema = kept_plan_schema(describe)
    good = {"primitive_actions": ["noop", "do"], "macro_actions": [], "skill_max_steps": 8,
            "reward_terms": [{"kind": "death", "target": "", "weight": -2}]}
    assert schema.model_validate(good).skill_max_steps == 8
    for kind in ("success", "stage"):
        with pytest.raises(pydantic.ValidationError, match=r"reward_terms\.0\.kind"):
            schema.model_validate({**good, "reward_terms": [{"kind": kind, "target": "", "weight": 1}]})
    with pytest.raises(pydantic.ValidationError, match=r"primitive_actions\.0"):
        schema.model_validate({**good, "primitive_actions": ["fly"]})
    assert schema.model_validate({**good, "hand_back_within": 12}).hand_back_within == 8  # the env's limit
    blind = env_pb2.DescribeResponse()
    blind.CopyFrom(describe)
    del blind.threats[:]
    assert "hand_back_within" not in kept_plan_schema(blind).model_json_schema()["properties"]


def test_the_prompt_shows_the_plan_the_failures_and_the_planners_own_reward(env_server) -> None:
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    fast = FastAgent(ScriptedLLM(None), env_server.stub, describe, SkillLibrary(Path("/nonexistent/lib.json")))
    prompt, _ = kept_plan_prompt(fast, common_pb2.TaskSpec(name="make_wood_pickaxe", success=[PICKAXE]), PLAN,
                                 success_rate=0.25, failed=FAILED, env_frames=40_000, own_reward="+1 per stage")
    assert "1. wood: get wood (done when: at least 5 wood)" in prompt
    assert "the planner always pays +1 per stage" in prompt and "trains for 40000 frames" in prompt
    assert "- stage:" not in prompt and "- success:" not in prompt and "- death:" in prompt
    assert "{" + "plan_action" not in prompt and "`plan`: the chain acts" in prompt
    # What can hurt the player, and how near it may come, are the env's (Describe's threats and limit).
    assert "- `hand_back_within` (0 to 8; 0: off): the `plan` action also ends, its skill paused, while one of " \
           "zombie, skeleton, arrow is this many cells away or closer" in prompt
    assert '"hand_back_when_hurt": ..., "hand_back_within": ...}' in prompt and "{hand_back" not in prompt
    # The schema's limit on code, stated: a capable model wrote an 11,000-character macro action before it was.
    assert f"at most {SKILL_CODE_LIMITS['max_length']:,} characters" in " ".join(prompt.split())


def test_a_revision_shows_the_previous_answer_whole_and_how_it_did(env_server) -> None:
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    fast = FastAgent(ScriptedLLM(None), env_server.stub, describe, SkillLibrary(Path("/nonexistent/lib.json")))
    long_code = WALK + "".join(f"# note {i}: {'x' * 60}\n" for i in range(60))  # longer than an RL revision shows
    previous = {"primitive_actions": ["noop"], "skill_max_steps": 30, "reward_terms": [],
                "hand_back_when_hurt": True, "hand_back_within": 2,
                "macro_actions": [{"name": "step_aside", "description": "walk left", "code": long_code}]}
    task = common_pb2.TaskSpec(name="make_wood_pickaxe", success=[PICKAXE])
    first, _ = kept_plan_prompt(fast, task, PLAN, success_rate=0.25, failed=FAILED, env_frames=40_000,
                                own_reward="+1 per stage")
    revised, _ = kept_plan_prompt(fast, task, PLAN, success_rate=0.25, failed=FAILED, env_frames=40_000,
                                  own_reward="+1 per stage",
                                  revision=KeptPlanRevision(previous, "The policy never left the plan."))
    assert "This is a revision" not in first and "{revision}" not in first
    assert revised.startswith(first[:first.index("Answer with one JSON")])  # the first prompt, then the revision
    part = revised[len(first[:first.index("Answer with one JSON")]):]
    assert part.startswith("This is a revision. Your previous configuration")
    assert '"hand_back_within": 2' in part and json.dumps(long_code) in part  # the macro's code whole
    assert "How it did:\nThe policy never left the plan.\n" in part
    assert part.rstrip().endswith(first[first.index("Answer with one JSON"):].rstrip())
