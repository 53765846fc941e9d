"""A stop does not wait for an LLM answer: calls made within cancelled_by give up once the event is set (an embedded
run's Ctrl-C waited for a request the loaded server took minutes to answer)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from rlgpt.config import LLMSettings
from rlgpt.llm import cancel
from rlgpt.llm.client import LLMClient


class Stopped(Exception):
    pass


class Answer(BaseModel):
    word: str


def blocking_client(release: threading.Event) -> LLMClient:
    """An LLMClient whose server (a test double of the OpenAI SDK call) answers only once ``release`` is set."""
    client = LLMClient(LLMSettings.load(environ={}), base_url="http://127.0.0.1:9/v1")

    def create(**_: object) -> SimpleNamespace:
        release.wait(30)
        message = SimpleNamespace(content='{"word": "late"}')
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=None)

    client._client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))
    return client


def test_a_call_waiting_for_its_answer_gives_up_when_the_run_stops() -> None:
    stop, release = threading.Event(), threading.Event()
    client = blocking_client(release)
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    with cancel.cancelled_by(stop, Stopped), pytest.raises(Stopped):
        client.complete("slow", [{"role": "user", "content": "hi"}], Answer)
    assert time.monotonic() - started < 2  # not the 30 s the server would take
    release.set()


def test_without_a_stop_the_answer_comes_and_errors_reach_the_caller() -> None:
    stop, release = threading.Event(), threading.Event()
    release.set()
    with cancel.cancelled_by(stop, Stopped):
        answer, _ = blocking_client(release).complete("slow", [{"role": "user", "content": "hi"}], Answer)
        assert answer.word == "late"
        with pytest.raises(ZeroDivisionError):
            cancel.call(lambda: 1 // 0)
    assert cancel.call(lambda: 7) == 7  # outside the block: called here, as before


def test_a_retry_wait_is_cut_short_and_a_stop_before_the_call_sends_nothing() -> None:
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    with cancel.cancelled_by(stop, Stopped), pytest.raises(Stopped):
        cancel.sleep(30)
    assert time.monotonic() - started < 2
    sent = []
    with cancel.cancelled_by(stop, Stopped), pytest.raises(Stopped):
        cancel.call(lambda: sent.append(1))
    assert sent == []
