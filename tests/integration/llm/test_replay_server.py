"""Replaying a run's LLM calls: in-process (ReplayClient) and over HTTP (ReplayAnswerer behind ChatServer)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply
from pydantic import BaseModel

from rlgpt.config import LLMSettings
from rlgpt.errors import FailedPrecondition
from rlgpt.llm import LLMClient, LLMError, ReplayClient, StructuredOutputError
from rlgpt.llm.chat_server import ChatServer
from rlgpt.llm.replay import ReplayAnswerer

pytestmark = pytest.mark.timeout(60)
SETTINGS = LLMSettings(max_retries=0, backoff_seconds=0.01, timeout_seconds=10.0, model="scripted")


class Answer(BaseModel):
    name: str


def ask(client, agent: str, prompt: str = "go") -> Answer:
    return client.complete(agent, [{"role": "user", "content": prompt}], Answer)[0]


@pytest.fixture
def records(tmp_path):
    """A recorded run: slow says plan-a, fast says wood then (after one repair) stone, critic says ok."""
    script = [Reply.json({"name": "plan-a"}), Reply.json({"name": "wood"}), Reply(text="oops"),
              Reply.json({"name": "stone"}), Reply.json({"name": "ok"})]
    with FakeOpenAIServer(script) as server:
        client = LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm")
        assert [ask(client, a, p).name for a, p in (("slow", "plan"), ("fast", "skill 1"), ("fast", "skill 2"),
                                                     ("critic", "judge"))] == ["plan-a", "wood", "stone", "ok"]
    return tmp_path / "llm"


def test_answerer_over_http_gives_each_agent_its_calls_in_order(records) -> None:
    with ChatServer(ReplayAnswerer(records), model="replay") as server:
        client = LLMClient(LLMSettings(**{**SETTINGS.__dict__, "model": "replay"}), base_url=server.base_url)
        # Agents may interleave differently than recorded (the critic first here): each has its own queue.
        assert ask(client, "critic", "judge").name == "ok"
        assert ask(client, "fast", "skill 1").name == "wood"
        assert ask(client, "slow", "plan").name == "plan-a"
        assert ask(client, "fast", "a prompt that changed").name == "stone"
        calls = server.answerer.calls
        assert calls.same_prompt == 3 and sum(calls.taken.values()) == 4 and calls.left() == {}
        with pytest.raises(LLMError, match=r"HTTP 409: .*the replay of .* holds 2 'fast' call\(s\) and this run asks "
                                           r"for call 3 \(prompt starts 'one more'\)"):
            ask(client, "fast", "one more")


def test_a_recorded_failure_fails_again_with_both_attempts_answered_by_the_same_record(tmp_path) -> None:
    with FakeOpenAIServer([Reply(text="not json")]) as server, pytest.raises(StructuredOutputError):
        ask(LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm"), "fast")
    with ChatServer(ReplayAnswerer(tmp_path / "llm")) as server:
        client = LLMClient(SETTINGS, base_url=server.base_url)
        with pytest.raises(StructuredOutputError, match="after one repair attempt"):
            ask(client, "fast")
        assert server.answerer.calls.taken["fast"] == 1  # the repair attempt did not take a second record


def test_in_process_replay_of_a_failed_call_carries_its_record(tmp_path) -> None:
    with FakeOpenAIServer([Reply(text="not json")]) as server, pytest.raises(StructuredOutputError):
        ask(LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm"), "fast")
    with pytest.raises(StructuredOutputError) as caught:
        ask(ReplayClient(tmp_path / "llm"), "fast")
    assert caught.value.record is not None and caught.value.record.response == "not json"


def test_a_client_without_the_agent_header_gets_a_400(records) -> None:
    with ChatServer(ReplayAnswerer(records)) as server:
        req = urllib.request.Request(server.base_url + "/chat/completions",
                                     data=json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode())
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=5)
    assert caught.value.code == 400 and "X-RLGPT-Agent" in json.loads(caught.value.read())["error"]["message"]


@pytest.mark.parametrize(("content", "says"), [("{not json", "is corrupt"), ('{"agent": "fast"}', "missing messages")])
def test_a_corrupt_record_is_named_before_anything_runs(records, content, says) -> None:
    bad = records / "00009-fast.json"
    bad.write_text(content)
    with pytest.raises(FailedPrecondition, match=says) as caught:
        ReplayAnswerer(records)
    assert str(bad) in str(caught.value)


