"""What an InvalidAction says a skill yielded: something its author recognises, never a module path or an address."""

from __future__ import annotations

import re
from typing import Any

import pytest

from services.env_server.backends.base import get_backend
from services.env_server.skills.api import make_agent
from services.env_server.skills.worker import Worker, yielded_text

AGENT = make_agent("crafter", ["noop", "do"])


def helper(agent: Any) -> Any:
    yield "noop"


class Thing:
    """A value with the default repr (``<module.Thing object at 0x...>``)."""


@pytest.mark.parametrize(("value", "expected"), [
    (AGENT, "the agent object"),
    (helper(AGENT), "a generator from helper(...) (to run it, write `yield from helper(...)`)"),
    (AGENT.step_to, "the method agent.step_to itself (call it: agent.step_to(...))"),
    (helper, "the function helper itself (call it: helper(...))"),
    (len, "the function len itself (call it: len(...))"),
    ("jump", "'jump'"),
    (3, "3"),
    (None, "None"),
    (["noop"], "['noop']"),
    ([AGENT, AGENT], "a list of 2 items"),
    (Thing(), "a Thing object"),
])
def test_a_yielded_value_is_named_as_its_author_knows_it(value: Any, expected: str) -> None:
    assert yielded_text(value, AGENT) == expected


def test_an_invalid_action_from_a_worker_names_no_module_and_no_address() -> None:
    env = get_backend("crafter").make_env()
    env.reset(0)
    worker = Worker(tick_budget=1000)
    assert worker.load("k", "def skill(agent):\n    yield 'noop'\n    yield agent\n", 16384) == {"ok": True}
    assert worker.start(0, "k", "crafter", ["noop", "do"]) == {"ok": True}
    assert worker.advance([[0, env.perception()]])["results"][0][1].get("action") == "noop"
    error = worker.advance([[0, env.perception()]])["results"][0][1]["error"]
    assert error["type"] == "InvalidAction" and error["line"] == 3
    assert error["message"] == "yielded the agent object, which is not an action name; valid: noop, do"
    assert not re.search(r"0x[0-9a-f]|services\.", error["message"])
