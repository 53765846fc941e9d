"""The slow agent with scripted LLM answers (an OpenAI-compatible test double): its plan, and bad plans repaired once
then refused."""

from __future__ import annotations

import json

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.llm import LLMClient, StructuredOutputError
from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.agents.slow import SlowAgent

SETTINGS = LLMSettings(max_retries=1, backoff_seconds=0.01, timeout_seconds=5, model="scripted")
PLAN = {"rationale": "wood first", "subtasks": [
    {"name": "get_wood", "description": "collect two wood", "success": [{"item": "wood", "count": 2}],
     "decision": "code", "skills": []},
    {"name": "find_cow", "description": "eat a cow", "success": [{"achievement": "eat_cow"}], "decision": "rl",
     "skills": []}]}


def llm(server: FakeOpenAIServer, tmp_path) -> LLMClient:
    return LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm")


def test_slow_agent_plan(describe, library, tmp_path) -> None:
    with FakeOpenAIServer([Reply.json(PLAN)]) as server:
        plan, record = SlowAgent(llm(server, tmp_path), describe, library).plan(common_pb2.TaskSpec(name="eat_cow"))
    assert [s.name for s in plan.subtasks] == ["get_wood", "find_cow"]
    assert plan.subtasks[0].success[0].inventory.count == 2 and plan.subtasks[1].decision == planner_pb2.DECISION_RL
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert "collect_diamond" in json.dumps(schema)  # vocabulary enums are in the schema
    assert "eat_cow" in server.requests[0]["messages"][0]["content"]
    assert record.prompt_tokens > 0


@pytest.mark.parametrize("bad", [
    {"rationale": "nothing to do", "subtasks": []},
    {"rationale": "too much", "subtasks": [PLAN["subtasks"][0]] * 1000},
    {"rationale": "x", "subtasks": [{**PLAN["subtasks"][0], "success": [{"achievement": "fly_to_moon"}]}]},
    {"rationale": "x", "subtasks": [{**PLAN["subtasks"][0], "success": [{"achievement": "collect_wood",
                                                                         "item": "wood"}]}]},
])
def test_bad_plans_are_repaired_once_then_fail_clearly(describe, library, tmp_path, bad) -> None:
    with FakeOpenAIServer([Reply.json(bad), Reply.json(PLAN)]) as server:
        plan, record = SlowAgent(llm(server, tmp_path), describe, library).plan(common_pb2.TaskSpec(name="eat_cow"))
    assert record.attempts == 2 and len(plan.subtasks) == 2
    assert "invalid" in server.requests[1]["messages"][-1]["content"]
    with FakeOpenAIServer([Reply.json(bad)]) as server, pytest.raises(StructuredOutputError):
        SlowAgent(llm(server, tmp_path), describe, library).plan(common_pb2.TaskSpec(name="eat_cow"))
