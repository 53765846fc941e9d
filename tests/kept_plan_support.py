"""What the tests of RL around a kept plan share: a three-sub-task plan, failed chain episodes as the controller
records them, and a test double of the LLM."""

from __future__ import annotations

from typing import Any

from rlgpt.llm.client import CallRecord, StructuredOutputError
from rlgpt.v1 import common_pb2, planner_pb2

WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=5))
TABLE = common_pb2.Condition(achievement="place_table")
PICKAXE = common_pb2.Condition(achievement="make_wood_pickaxe")
PLAN = planner_pb2.Plan(subtasks=[
    planner_pb2.SubTask(name="wood", description="get wood", success=[WOOD], decision=planner_pb2.DECISION_CODE),
    planner_pb2.SubTask(name="table", description="place a table", success=[TABLE],
                        decision=planner_pb2.DECISION_CODE),
    planner_pb2.SubTask(name="pickaxe", description="make a pickaxe", success=[PICKAXE],
                        decision=planner_pb2.DECISION_CODE)])
WALK = "def skill(agent):\n    for _ in range(4):\n        yield 'move_left'\n"
FAILED = [
    {"end_reason": "death", "death_cause": "zombie", "steps": 300, "achievements": [], "inventory": {"wood": 2},
     "tail": ["step 290 at (3, 4): health 3->1 (zombie)", "end: died (zombie)"]},
    # The table used up wood: the wood sub-task still counts as done.
    {"end_reason": "death", "death_cause": "arrow", "steps": 500, "achievements": ["place_table"],
     "inventory": {"wood": 1}},
    {"end_reason": "time_limit", "death_cause": "", "steps": 1000, "achievements": ["place_table"],
     "inventory": {}},
]


class ScriptedLLM:
    """A test double of the LLM: one answer for the kept plan's schema (None: an unusable answer)."""

    def __init__(self, answer: dict[str, Any] | None) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def complete(self, agent: str, messages: list[dict[str, str]], schema: type[Any], *, iteration: int = 0,
                 **_: Any) -> tuple[Any, CallRecord]:
        self.prompts.append(messages[-1]["content"])
        record = CallRecord(seq=0, agent=agent, iteration=iteration, model="scripted", messages=messages,
                            response="{}", parsed=self.answer or {}, prompt_tokens=1, completion_tokens=1,
                            latency_seconds=0.0, attempts=1)
        if self.answer is None:
            raise StructuredOutputError("no JSON object in the answer", record)
        return schema.model_validate(self.answer), record
