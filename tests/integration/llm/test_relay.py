"""The LLM relay on a real port, asked by the real LLM client; the test writes the answer files."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from rlgpt.config import LLMSettings
from rlgpt.errors import Unavailable
from rlgpt.llm import LLMClient
from rlgpt.llm.chat_server import ChatServer
from rlgpt.llm.relay import DirectoryAnswerer

pytestmark = pytest.mark.timeout(60)


class Answer(BaseModel):
    item: str = Field(json_schema_extra={"enum": ["wood", "stone"]})
    count: int = Field(ge=0, le=10)


SETTINGS = LLMSettings(max_retries=0, backoff_seconds=0.01, timeout_seconds=20.0, model="relay")


@contextlib.contextmanager
def relay(tmp_path: Path, timeout: float = 10.0) -> Iterator[ChatServer]:
    answerer = DirectoryAnswerer(tmp_path, timeout_seconds=timeout, poll_seconds=0.05)
    try:
        with ChatServer(answerer) as server:
            yield server
    finally:
        answerer.close()


def rejection(tmp_path: Path, number: str) -> str:
    """The reason the relay wrote for a rejected answer (waits for it)."""
    deadline = time.monotonic() + 10
    while not (found := list((tmp_path / "rejected").glob(f"{number}-*.txt"))):
        assert time.monotonic() < deadline, f"answer {number} was never rejected"
        time.sleep(0.02)
    return found[0].read_text()


def ask_in_background(server: ChatServer, **overrides) -> dict:
    """Starts one client call on a thread; the dict gets 'answer' or 'error'."""
    out: dict = {}
    settings = LLMSettings(**{**SETTINGS.__dict__, **overrides})

    def call() -> None:
        try:
            out["answer"], out["record"] = LLMClient(settings, base_url=server.base_url).complete(
                "fast", [{"role": "user", "content": "how much wood?"}], Answer)
        except Exception as exc:  # the test inspects whatever the client raised
            out["error"] = exc

    out["thread"] = threading.Thread(target=call)
    out["thread"].start()
    return out


def wait_for(path: Path, seconds: float = 10.0) -> Path:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return path


def write_answer(path: Path, text: str) -> None:
    path.write_text(text)
    # The relay waits until a file is a second old before judging a bad one (it may still be written).
    old = time.time() - 5
    os.utime(path, (old, old))


def test_request_file_holds_messages_and_schema_and_the_answer_file_answers(tmp_path) -> None:
    with relay(tmp_path) as server:
        call = ask_in_background(server)
        request = json.loads(wait_for(tmp_path / "requests" / "0001.json").read_text())
        assert request["agent"] == "fast" and request["messages"][0]["content"] == "how much wood?"
        assert request["response_format"]["json_schema"]["schema"]["properties"]["item"]["enum"] == ["wood", "stone"]
        assert request["answer_file"] == str(tmp_path / "answers" / "0001.json")
        (tmp_path / "answers" / "0001.json").write_text('{"item": "wood", "count": 3}')
        call["thread"].join(15)
    assert call["answer"] == Answer(item="wood", count=3)
    assert call["record"].completion_tokens == 7  # estimated: 28 characters / 4


@pytest.mark.parametrize(("bad", "reason"), [
    ("", "empty"),
    ("wood, three of them", "not JSON"),
    ('{"item": "gold", "count": 3}', "does not match the schema: item: 'gold' is not one of"),
])
def test_bad_answer_is_set_aside_with_its_reason_and_a_corrected_one_is_used(tmp_path, bad, reason) -> None:
    with relay(tmp_path) as server:
        call = ask_in_background(server)
        wait_for(tmp_path / "requests" / "0001.json")
        write_answer(tmp_path / "answers" / "0001.json", bad)
        assert reason in rejection(tmp_path, "0001")
        assert not (tmp_path / "answers" / "0001.json").exists() and "error" not in call
        (tmp_path / "answers" / "0001.json").write_text('{"item": "stone", "count": 1}')
        call["thread"].join(15)
    assert call["answer"] == Answer(item="stone", count=1)


def test_answer_to_a_request_never_made_is_set_aside(tmp_path) -> None:
    with relay(tmp_path):
        write_answer(tmp_path / "answers" / "0007.json", '{"item": "wood", "count": 1}')
        why = rejection(tmp_path, "0007")
    assert "never made (made so far: none yet)" in why
    assert not (tmp_path / "answers" / "0007.json").exists()


def test_no_answer_in_time_is_a_504_that_names_the_file_and_the_last_rejection(tmp_path) -> None:
    with relay(tmp_path, timeout=1.5) as server:
        call = ask_in_background(server)
        wait_for(tmp_path / "requests" / "0001.json")
        write_answer(tmp_path / "answers" / "0001.json", "[1, 2")
        call["thread"].join(15)
    assert isinstance(call["error"], Unavailable)
    message = str(call["error"])
    assert "no answer to relay request 0001" in message and "answers/0001.json" in message
    assert "the last answer was rejected: the answer is not JSON" in message


def test_a_retried_call_keeps_its_number_so_a_late_answer_is_used(tmp_path) -> None:
    # The client gives up after 1 s and retries; the retry must wait on request 0001, not make 0002.
    with relay(tmp_path, timeout=30) as server:
        call = ask_in_background(server, timeout_seconds=1.0, max_retries=3)
        wait_for(tmp_path / "requests" / "0001.json")
        time.sleep(1.5)
        (tmp_path / "answers" / "0001.json").write_text('{"item": "wood", "count": 2}')
        call["thread"].join(15)
    assert call["answer"].count == 2
    assert sorted(p.name for p in (tmp_path / "requests").iterdir()) == ["0001.json"]


def test_numbers_go_on_after_an_earlier_relay_on_the_same_directory(tmp_path) -> None:
    (tmp_path / "requests").mkdir()
    (tmp_path / "requests" / "0004.json").write_text("{}")
    with relay(tmp_path) as server:
        call = ask_in_background(server)
        wait_for(tmp_path / "requests" / "0005.json")
        (tmp_path / "answers" / "0005.json").write_text('{"item": "wood", "count": 0}')
        call["thread"].join(15)
    assert call["answer"].count == 0


def test_a_request_that_is_not_a_chat_is_a_400(tmp_path) -> None:
    import urllib.error
    import urllib.request

    with relay(tmp_path) as server:
        req = urllib.request.Request(server.base_url + "/chat/completions", data=b'{"messages": []}',
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=5)
    assert caught.value.code == 400
    assert "non-empty 'messages'" in json.loads(caught.value.read())["error"]["message"]


def test_an_answer_longer_than_max_tokens_is_set_aside_as_a_real_server_would_cut_it(tmp_path) -> None:
    """The request says how many characters its max_tokens allows (counted as the relay counts tokens); a longer
    answer is rejected with the limit, so a relay run's answers are ones a real endpoint could have given."""
    with relay(tmp_path) as server:
        call = ask_in_background(server, max_tokens=16)
        request = json.loads(wait_for(tmp_path / "requests" / "0001.json").read_text())
        assert request["max_tokens"] == 16 and "at most 64 characters (max_tokens=16" in request["how_to_answer"]
        write_answer(tmp_path / "answers" / "0001.json", '{"item": "wood", "count": 3}' + " " * 40)
        assert "this request allows max_tokens=16: a real server would cut it off" in rejection(tmp_path, "0001")
        (tmp_path / "answers" / "0001.json").write_text('{"item": "wood", "count": 3}')
        call["thread"].join(15)
    assert call["answer"] == Answer(item="wood", count=3)
