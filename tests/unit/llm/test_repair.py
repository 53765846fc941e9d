"""An answer that does not match its schema is sent back once, whole, with what was wrong: a text over its limit says
by how much (a capable model's skills were refused for a 450-character description and rewritten from the first
half of their code, which the repair request had cut at 4,000 characters)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, Field

from rlgpt.config import LLMSettings
from rlgpt.llm.client import LLMClient


class Skill(BaseModel):
    description: str = Field(max_length=400)
    code: str = Field(max_length=8000)


def answering(*answers: str) -> tuple[LLMClient, list[list[dict[str, Any]]]]:
    """An LLMClient whose server (a test double of the OpenAI SDK call) gives ``answers`` in turn; what it was asked."""
    client = LLMClient(LLMSettings.load(environ={}), base_url="http://127.0.0.1:9/v1")
    asked: list[list[dict[str, Any]]] = []
    left = list(answers)

    def create(**kwargs: Any) -> SimpleNamespace:
        asked.append(kwargs["messages"])
        message = SimpleNamespace(content=left.pop(0))
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=None)

    client._client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))
    return client, asked


def test_a_repair_shows_the_whole_answer_and_how_much_too_long_a_text_is() -> None:
    code = "def skill(agent):\n" + "    yield 'noop'  # step\n" * 300  # 7,518 characters
    first = json.dumps({"description": "d" * 452, "code": code})
    second = json.dumps({"description": "short", "code": code})
    client, asked = answering(first, second)
    answer, record = client.complete("fast", [{"role": "user", "content": "write a skill"}], Skill)
    assert answer.description == "short" and answer.code == code and record.attempts == 2
    repair = asked[1]
    assert repair[1] == {"role": "assistant", "content": first}  # whole, code and all
    assert repair[2]["content"].startswith("That answer is invalid: description: String should have at most 400 "
                                           "characters (it has 452; cut at least 52)")
