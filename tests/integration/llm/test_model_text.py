"""A model's answer that holds text UTF-8 cannot encode (a lone surrogate, raw in the HTTP answer or as a JSON escape
inside the answer text), through the LLM client and a real HTTP server: every string of the parsed answer can go
into a proto (issue 38, item 1)."""

from __future__ import annotations

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply
from pydantic import BaseModel

from rlgpt.config import LLMSettings
from rlgpt.llm import LLMClient
from rlgpt.text import REPLACEMENT
from rlgpt.v1 import common_pb2


class Answer(BaseModel):
    name: str
    steps: list[str]


SETTINGS = LLMSettings(max_retries=0, timeout_seconds=5.0, model="scripted")


@pytest.mark.parametrize("reply", [
    Reply(text='{"name": "wood' + chr(0xD800) + '", "steps": ["chop' + chr(0xDC00) + '"]}'),  # raw in the answer
    Reply.json({"name": "wood" + chr(0xD800), "steps": ["chop" + chr(0xDC00)]}),  # a JSON escape in the answer
], ids=["raw", "escaped"])
def test_a_lone_surrogate_in_a_model_answer_is_replaced(reply: Reply) -> None:
    with FakeOpenAIServer([reply]) as server:
        answer, record = LLMClient(SETTINGS, base_url=server.base_url).complete(
            "fast", [{"role": "user", "content": "go"}], Answer)
    assert (answer.name, answer.steps, record.attempts) == (f"wood{REPLACEMENT}", [f"chop{REPLACEMENT}"], 1)
    common_pb2.SkillError(type=answer.name, message=answer.steps[0]).SerializeToString()  # raised before
