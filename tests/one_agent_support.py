"""The one agent's answers its tests share (unit: schema and prompt; integration: served through the env server)."""

from __future__ import annotations

from rlgpt.config import LLMSettings
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
