"""The sandbox worker process: real subprocess, real limits."""

import pytest

from rlgpt.config import EnvServerSettings
from services.env_server.skills.executor import SkillExecutor, SkillRecord

ACTIONS = ["noop", "move_left", "do"]
PERCEPTION = {"position": [5, 5], "facing": [0, 1], "view": [["grass"] * 9 for _ in range(7)],
              "view_origin": [1, 2], "inventory": {"wood": 0}, "status": {"health": 9, "food": 9, "drink": 9,
                                                                          "energy": 9},
              "sleeping": False, "daylight": 1.0}


@pytest.fixture
def executor():
    ex = SkillExecutor(EnvServerSettings(skill_call_seconds=1.0, skill_tick_budget=5000, skill_memory_mb=512))
    yield ex
    ex.close()


def skill(code: str, version: int = 1) -> SkillRecord:
    return SkillRecord(name="t", description="", code=code, backend="crafter", version=version)


def test_generator_state_lives_across_advances(executor) -> None:
    code = "def skill(agent):\n    for a in ['move_left', 'do']:\n        yield a\n"
    assert executor.start(0, skill(code), "crafter", ACTIONS) is None
    assert executor.advance({0: PERCEPTION})[0]["action"] == "move_left"
    assert executor.advance({0: PERCEPTION})[0]["action"] == "do"
    assert executor.advance({0: PERCEPTION})[0] == {"done": True, "yielded": 2}


def test_agent_sees_the_perception(executor) -> None:
    code = "def skill(agent):\n    yield 'do' if agent.position == (5, 5) and agent.at(1, 2) == 'grass' else 'noop'\n"
    executor.start(3, skill(code), "crafter", ACTIONS)
    assert executor.advance({3: PERCEPTION})[3]["action"] == "do"


def test_exception_reports_type_and_line(executor) -> None:
    executor.start(0, skill("def skill(agent):\n    yield 'noop'\n    {}['k']\n    yield 'noop'\n"), "crafter", ACTIONS)
    executor.advance({0: PERCEPTION})
    error = executor.advance({0: PERCEPTION})[0]["error"]
    assert error["type"] == "KeyError" and error["line"] == 3 and error["code_line"] == "{}['k']"


def test_invalid_action(executor) -> None:
    executor.start(0, skill("def skill(agent):\n    yield 42\n"), "crafter", ACTIONS)
    error = executor.advance({0: PERCEPTION})[0]["error"]
    assert error["type"] == "InvalidAction" and error["line"] == 2 and "42" in error["message"]


def test_budget_then_timeout_then_worker_is_replaced(executor) -> None:
    executor.start(0, skill("def skill(agent):\n    while True:\n        pass\n    yield 'noop'\n"), "crafter",
                   ACTIONS)
    assert executor.advance({0: PERCEPTION})[0]["error"]["type"] == "StepBudgetExceeded"
    executor.start(1, skill("def skill(agent):\n    x = 9 ** 9 ** 9\n    yield 'noop'\n", 2), "crafter", ACTIONS)
    first_pid = executor._process.pid
    error = executor.advance({1: PERCEPTION})[1]["error"]
    assert error["type"] == "Timeout" and error["line"] == 2
    executor.start(2, skill("def skill(agent):\n    yield 'do'\n", 3), "crafter", ACTIONS)
    assert executor.advance({2: PERCEPTION})[2]["action"] == "do"
    assert executor._process.pid != first_pid


def test_memory_limit(executor) -> None:
    executor.start(0, skill("def skill(agent):\n    x = 'a' * (2 ** 34)\n    yield 'noop'\n"), "crafter", ACTIONS)
    assert executor.advance({0: PERCEPTION})[0]["error"]["type"] == "MemoryLimit"
    executor.start(1, skill("def skill(agent):\n    yield 'noop'\n", 2), "crafter", ACTIONS)
    assert executor.advance({1: PERCEPTION})[1]["action"] == "noop"


def test_print_does_not_corrupt_the_protocol(executor) -> None:
    executor.start(0, skill("def skill(agent):\n    print('hello')\n    yield 'noop'\n"), "crafter", ACTIONS)
    assert executor.advance({0: PERCEPTION})[0]["action"] == "noop"
