"""bench-skills: start inventories from the world's rules; answers only count for the prompt they answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_skills import AnswerFiles, MissingAnswer, _digest, start_items
from rlgpt.llm.client import StructuredOutputError
from services.env_server.backends.crafter_rules import crafter_rules
from services.planner.schemas import SkillAnswer


@pytest.mark.parametrize(("achievement", "expected"), [
    ("make_wood_pickaxe", {"wood": 3}),          # 1 for the pickaxe, 2 to place the table it needs nearby
    ("make_stone_pickaxe", {"wood": 3, "stone": 1}),
    ("place_furnace", {"stone": 4}),
    ("collect_iron", {"stone_pickaxe": 1}),
    ("collect_wood", {}),
    ("wake_up", {}),
])
def test_start_items_follow_the_rules(achievement: str, expected: dict[str, int]) -> None:
    assert start_items(crafter_rules(), achievement) == expected


def test_an_answer_counts_only_for_its_own_prompt(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "prompt v1"}]
    client = AnswerFiles(tmp_path, "collect_wood", 1, write_prompts=True)
    with pytest.raises(MissingAnswer):
        client.complete("fast", messages, SkillAnswer)
    assert (tmp_path / "collect_wood.a1.prompt.txt").read_text() == "prompt v1"
    answer = {"name": "walk", "description": "walks", "code": "def skill(agent):\n    yield 'noop'\n",
              "_prompt_sha256": _digest("prompt v1")}
    (tmp_path / "collect_wood.a1.json").write_text(json.dumps(answer))
    parsed, _record = client.complete("fast", messages, SkillAnswer)
    assert parsed.name == "walk"
    with pytest.raises(MissingAnswer, match="older prompt"):
        client.complete("fast", [{"role": "user", "content": "prompt v2"}], SkillAnswer)


def test_an_answer_that_breaks_the_schema_is_that_attempts_failure(tmp_path: Path) -> None:
    # The fast agent turns StructuredOutputError into an unusable candidate (the attempt fails with the reason);
    # a pydantic traceback used to stop the whole benchmark.
    messages = [{"role": "user", "content": "prompt"}]
    answer = {"name": "walk", "description": "x" * 450, "code": "def skill(agent):\n    yield 'noop'\n",
              "_prompt_sha256": _digest("prompt")}
    (tmp_path / "collect_wood.a1.json").write_text(json.dumps(answer))
    client = AnswerFiles(tmp_path, "collect_wood", 1, write_prompts=False)
    with pytest.raises(StructuredOutputError, match="description: String should have at most 400") as caught:
        client.complete("fast", messages, SkillAnswer)
    assert caught.value.record is not None and caught.value.record.parsed is None
    assert "description" in caught.value.record.error
