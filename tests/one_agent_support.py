"""The one agent's answers its tests share (unit: schema and prompt; integration: served through the env server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.llm.client import LLMClient
from rlgpt.v1 import common_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.prompts import EvalProtocol

SETTINGS = LLMSettings(max_retries=1, backoff_seconds=0.01, timeout_seconds=5, model="scripted")
PROTOCOL = EvalProtocol(test_episodes=2, test_steps=150, env_frames=20000, eval_episodes=8, final_frames=1000)
RL = {"primitive_actions": ["noop", "do"], "skills": [], "skill_max_steps": 1,
      "reward_terms": [{"kind": "success", "target": "", "weight": 5}], "episode_length": 300}

# An answer with Python skills: get_wood coded, find_cow trained.
GET_WOOD = {"name": "get_wood", "description": "collect wood", "success": [{"achievement": "collect_wood"}],
            "decision": "code", "skills": [], "code": COLLECT_WOOD}
FIND_COW = {"name": "find_cow", "description": "eat a cow", "success": [{"achievement": "eat_cow"}],
            "decision": "rl", "skills": [], "rl": RL}
CODE_ANSWER = {"rationale": "wood first", "subtasks": [GET_WOOD, FIND_COW]}

# An answer with skill programs: collect_wood as a program, make_wood_pickaxe trained.
WOOD = [{"op": "collect", "item": "wood", "count": 1}]
CODED = {"name": "collect_wood", "description": "collect wood", "success": [{"item": "wood", "count": 1}],
         "decision": "code", "skills": [], "program": WOOD}
LEARNED = {"name": "make_wood_pickaxe", "description": "make the pickaxe",
           "success": [{"achievement": "make_wood_pickaxe"}], "decision": "rl", "skills": [], "rl": RL}
PROGRAM_ANSWER = {"rationale": "wood first", "subtasks": [CODED, LEARNED]}


def solved(agent_of: Any, answer: dict, task: common_pb2.TaskSpec, tmp_path: Path, **solve: Any) -> tuple:
    """The agent ``agent_of(llm)`` solves ``task`` with one call through the real LLM client to a scripted
    OpenAI-compatible test double answering ``answer``: the agent, its plan and record, and the double (its
    requests)."""
    with FakeOpenAIServer([Reply.json(answer)]) as server:
        agent = agent_of(LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm"))
        plan, record = agent.solve(task, **solve)
    return agent, plan, record, server
