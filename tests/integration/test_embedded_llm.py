"""The embedded local LLM (llama.cpp's server + a model from a PyPI package) answers both agents validly."""

from __future__ import annotations

import pytest

from rlgpt.config import LLMSettings
from rlgpt.llm.factory import make_client
from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.agents.fast import FastAgent
from services.planner.agents.slow import SlowAgent
from services.planner.schemas import SkillAnswer
from services.planner.skill_library import SkillLibrary

pytestmark = pytest.mark.timeout(600)


def test_embedded_llm_plan_and_skill_come_back_valid(env_server, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = LLMSettings(temperature=0.0, max_retries=1, timeout_seconds=300, max_tokens=512)
    llm, server = make_client(settings, record_dir=tmp_path / "llm", log_dir=tmp_path)
    assert server is not None  # no key, no URL: the local server was started
    try:
        describe = env_server.stub.Describe(env_pb2.DescribeRequest())
        library = SkillLibrary(tmp_path / "library.json")
        plan, record = SlowAgent(llm, describe, library).plan(common_pb2.TaskSpec(name="collect_wood"))
        assert 1 <= len(plan.subtasks) <= 12 and record.completion_tokens > 0
        assert all(s.success for s in plan.subtasks)
        subtask = planner_pb2.SubTask(name="collect_wood", description="collect wood from a tree",
                                      success=[common_pb2.Condition(achievement="collect_wood")])
        [candidate] = FastAgent(llm, env_server.stub, describe, library, test_episodes=1,
                                test_steps=50).write_skill(subtask)
        # The answer is schema-valid; whether the code works is for the env server to judge.
        assert isinstance(candidate.answer, SkillAnswer) and "def " in candidate.answer.code
        assert candidate.success_rate >= 0 or candidate.error is not None
    finally:
        server.stop()
