"""The LLM client against a test double of an OpenAI-compatible server: every failure mode."""

from __future__ import annotations

import json

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply
from pydantic import BaseModel, Field

from rlgpt.config import LLMSettings
from rlgpt.errors import FailedPrecondition, Unavailable
from rlgpt.llm import LLMClient, LLMError, ReplayClient, StructuredOutputError


class Answer(BaseModel):
    name: str = Field(max_length=50)
    count: int = Field(ge=0, le=10)


SETTINGS = LLMSettings(max_retries=2, backoff_seconds=0.01, timeout_seconds=2.0, model="scripted")
GOOD = Reply.json({"name": "wood", "count": 3})


def client(server: FakeOpenAIServer, tmp_path=None, **overrides) -> LLMClient:
    settings = LLMSettings(**{**SETTINGS.__dict__, **overrides})
    return LLMClient(settings, base_url=server.base_url, record_dir=tmp_path)


def ask(c: LLMClient) -> tuple[Answer, object]:
    return c.complete("fast", [{"role": "user", "content": "go"}], Answer)


def test_valid_answer_with_schema_and_accounting(tmp_path) -> None:
    with FakeOpenAIServer([GOOD]) as server:
        answer, record = ask(client(server, tmp_path))
    assert answer == Answer(name="wood", count=3)
    assert record.prompt_tokens == 11 and record.completion_tokens == 7 and record.attempts == 1
    sent = server.requests[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"]["properties"]["count"]["maximum"] == 10
    assert sent["json_schema"]["schema"]["properties"]["name"]["maxLength"] == 50  # a grammar can carry it
    saved = json.loads(next(tmp_path.glob("*-fast.json")).read_text())
    assert saved["parsed"] == {"name": "wood", "count": 3} and saved["messages"][0]["content"] == "go"


def test_llama_cpp_mode_sends_json_object_with_schema() -> None:
    with FakeOpenAIServer([GOOD]) as server:
        c = LLMClient(SETTINGS, base_url=server.base_url, structured="json_object")
        ask(c)
    assert server.requests[0]["response_format"]["type"] == "json_object"
    assert "schema" in server.requests[0]["response_format"]
    assert "maxLength" not in json.dumps(server.requests[0])  # llama.cpp's grammars choke on string limits


@pytest.mark.parametrize("bad", ["I think the answer is wood.", '{"name": "wood", "count": 99}', ""])
def test_invalid_answer_gets_one_repair_then_succeeds(bad: str) -> None:
    with FakeOpenAIServer([Reply(text=bad), GOOD]) as server:
        answer, record = ask(client(server))
    assert answer.count == 3 and record.attempts == 2
    repair = server.requests[1]["messages"][-1]["content"]
    assert "invalid" in repair


def test_invalid_twice_is_a_clear_error() -> None:
    with FakeOpenAIServer([Reply(text="not json")]) as server, pytest.raises(StructuredOutputError, match="Answer"):
        ask(client(server))
    assert len(server.requests) == 2


def test_control_characters_and_fences_are_tolerated() -> None:
    text = '```json\n{"name": "line1\nline2\ttab", "count": 1}\n```'
    with FakeOpenAIServer([Reply(text=text)]) as server:
        answer, _ = ask(client(server))
    assert answer.name == "line1\nline2\ttab"


def test_429_then_success_is_retried() -> None:
    with FakeOpenAIServer([Reply(status=429), Reply(status=429), GOOD]) as server:
        answer, _ = ask(client(server))
    assert answer.count == 3 and len(server.requests) == 3


def test_500_forever_is_a_clear_unavailable_error() -> None:
    with FakeOpenAIServer([Reply(status=500)]) as server, pytest.raises(Unavailable, match=r"failed 3 times"):
        ask(client(server))
    assert len(server.requests) == 3  # bounded: 1 + max_retries


def test_hanging_server_times_out() -> None:
    with FakeOpenAIServer([Reply(text="{}", delay=5)]) as server, pytest.raises(Unavailable, match="Timeout"):
        ask(client(server, timeout_seconds=0.3, max_retries=1))


def test_unknown_model_is_named() -> None:
    with FakeOpenAIServer([GOOD], models=("other",)) as server, pytest.raises(LLMError, match="RLGPT_LLM_MODEL"):
        ask(client(server))


def test_unreachable_server() -> None:
    settings = LLMSettings(**{**SETTINGS.__dict__, "max_retries": 1})
    c = LLMClient(settings, base_url="http://127.0.0.1:9/v1")
    with pytest.raises(Unavailable, match=r"127\.0\.0\.1:9"):
        ask(c)


def test_no_configuration_at_all_is_refused(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(FailedPrecondition, match="OPENAI_API_KEY"):
        LLMClient(LLMSettings())


def test_api_key_never_reaches_records(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RLGPT_TEST_KEY", "sk-test-secret-value-1234567890")
    settings = LLMSettings(**{**SETTINGS.__dict__, "api_key_env": "RLGPT_TEST_KEY"})
    with FakeOpenAIServer([GOOD]) as server:
        LLMClient(settings, base_url=server.base_url, record_dir=tmp_path).complete(
            "slow", [{"role": "user", "content": "x"}], Answer)
    assert all("sk-test-secret" not in p.read_text() for p in tmp_path.iterdir())


def test_replay_answers_from_records(tmp_path) -> None:
    with FakeOpenAIServer([GOOD, Reply.json({"name": "stone", "count": 1})]) as server:
        c = client(server, tmp_path / "rec")
        ask(c)
        ask(c)
    replay = ReplayClient(tmp_path / "rec", record_dir=tmp_path / "again")
    assert ask(replay)[0].name == "wood" and ask(replay)[0].name == "stone"
    assert replay.ledger.total_tokens() == 36
    with pytest.raises(FailedPrecondition, match=r"holds 2 'fast' call\(s\) and this run asks for call 3"):
        ask(replay)


def test_headers_name_the_agent_and_the_call() -> None:
    with FakeOpenAIServer([Reply(text="no json"), GOOD]) as server:
        ask(client(server))
    first, repair = server.headers
    assert first["x-rlgpt-agent"] == "fast" and first["x-rlgpt-attempt"] == "1"
    assert repair["x-rlgpt-attempt"] == "2" and repair["x-rlgpt-call"] == first["x-rlgpt-call"]


def test_json_schema_mode_sends_patterns_and_short_limits_but_not_long_ones() -> None:
    from rlgpt.llm.client import server_schema

    class Skill(BaseModel):
        name: str = Field(pattern=r"^[a-z_]+$", min_length=1, max_length=40)
        code: str = Field(min_length=10, max_length=8000)

    props = server_schema(Skill)["properties"]
    assert props["name"] == {"maxLength": 40, "minLength": 1, "pattern": "^[a-z_]+$", "title": "Name", "type": "string"}
    assert props["code"]["minLength"] == 10 and "maxLength" not in props["code"]
    assert "pattern" not in json.dumps(server_schema(Skill, keep_limits=False))
