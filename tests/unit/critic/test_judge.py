"""The critic's verdicts: the checks' numbers, an LLM's diagnosis (test double), and how the two merge."""

from __future__ import annotations

import json

import pytest
from critic_samples import episode, request

from rlgpt.prompts import render, shorten
from rlgpt.v1 import common_pb2
from services.critic.judge import CriticAnswer, deterministic_checks
from services.critic.prompt import PROMPT_DIR

ANSWER = {"success": False, "diagnosis": "The skill walks left forever.", "suggestion": "Explore, then chop.",
          "target": "slow"}


def test_long_prose_is_shortened_at_a_sentence_never_mid_word() -> None:
    text = "The skill walks left. " * 40 + "Then it stops."
    long = CriticAnswer.model_validate({**ANSWER, "diagnosis": text})
    assert len(long.diagnosis) <= 600 and long.diagnosis.endswith("The skill walks left. ...")
    assert shorten("one two three four five", 12) == "one two ..."
    assert shorten("short", 12) == "short"
    error = common_pb2.SkillError(type="ValueError", message="bad value " * 40, line=2)
    found = deterministic_checks(request(rollouts=[episode(error=error)]))
    assert "bad value bad value" in found.diagnosis and "bad valu." not in found.diagnosis


def test_answer_schema_and_prompt() -> None:
    long = CriticAnswer.model_validate({**ANSWER, "diagnosis": "x" * 2000})
    assert len(long.diagnosis) <= 600  # shortened, not rejected
    schema = json.dumps(CriticAnswer.model_json_schema())
    assert '"maxLength": 600' in schema and '"slow"' in schema
    assert "covers" in (PROMPT_DIR / "critic.txt").read_text().splitlines()[0]
    with pytest.raises(KeyError, match="needs fields"):
        render(PROMPT_DIR, "critic", subtask="x")
