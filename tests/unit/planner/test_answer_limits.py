"""The limits an answer schema enforces, stated in the prompts from the schema itself."""

from __future__ import annotations

from describe_support import recorded_describe
from pydantic import BaseModel, Field

from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.agents.fast import FastAgent
from services.planner.answer_limits import answer_limits
from services.planner.schemas import SkillAnswer, plan_schema, rl_schema
from services.planner.skill_library import SkillLibrary


def test_a_skill_answers_limits_are_its_schemas() -> None:
    assert answer_limits(SkillAnswer) == "description at most 400 characters; code 10 to 8,000 characters"


def test_nested_fields_and_entry_counts_are_named() -> None:
    text = answer_limits(plan_schema(recorded_describe(), ("walk",)))
    assert "rationale at most 1,200 characters" in text
    assert "subtasks 1 to 12 entries" in text
    assert "subtasks[].description at most 400 characters" in text
    assert "subtasks[].skills at most 6 entries" in text
    rl = answer_limits(rl_schema(recorded_describe(), ()))
    assert "macro_actions[].description at most 300 characters" in rl
    assert "skills empty (no entries offered)" in rl


def test_a_changed_limit_changes_the_sentence() -> None:
    class Short(BaseModel):
        name: str = Field(max_length=10)  # names are corrected, not refused: left out
        note: str = Field(min_length=2, max_length=20)
        tags: list[str] = Field(default_factory=list, max_length=3)

    assert answer_limits(Short) == "note 2 to 20 characters; tags at most 3 entries"


def test_the_fast_agents_prompt_states_every_limit(tmp_path) -> None:
    agent = FastAgent(llm=None, env=None, describe=recorded_describe(),  # type: ignore[arg-type]
                      library=SkillLibrary(tmp_path / "library.json"))
    subtask = planner_pb2.SubTask(name="collect_wood", description="get wood",
                                  success=[common_pb2.Condition(achievement="collect_wood")])
    assert f"its limits: {answer_limits(SkillAnswer)}." in agent.skill_prompt(subtask)
    prompt, schema = agent.rl_prompt(subtask, env_frames=20000)
    assert f"its limits: {answer_limits(schema)}." in prompt
