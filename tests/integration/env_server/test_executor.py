"""The sandbox worker process: real subprocess, real limits."""

import os
import signal
import threading
import time

import pytest

from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillExecutor, SkillRecord
from services.env_server.skills.pool import budget_for

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


def _wait_dead(pid: int) -> None:
    """Until the process is gone or a zombie (the executor reaps it when it notices)."""
    for _ in range(250):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return
        except FileNotFoundError:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} still alive")


def test_worker_killed_between_requests_is_a_crash_of_the_running_slots(executor) -> None:
    code = "def skill(agent):\n    while True:\n        yield 'noop'\n"
    assert executor.start(0, skill(code), "crafter", ACTIONS) is None
    assert executor.start(1, skill(code), "crafter", ACTIONS) is None
    assert executor.advance({0: PERCEPTION, 1: PERCEPTION})[0]["action"] == "noop"
    pid = executor.worker_pid
    os.kill(pid, signal.SIGKILL)
    _wait_dead(pid)
    results = executor.advance({0: PERCEPTION, 1: PERCEPTION})
    for slot in (0, 1):
        error = results[slot]["error"]
        assert error["type"] == "WorkerCrashed" and "SIGKILL" in error["message"], error
    # and the executor goes on with a fresh worker
    assert executor.start(0, skill("def skill(agent):\n    yield 'do'\n", 2), "crafter", ACTIONS) is None
    assert executor.advance({0: PERCEPTION})[0]["action"] == "do"
    assert executor.worker_pid != pid


def test_timeout_blames_only_the_slot_that_ran_past_its_limit(executor) -> None:
    good = skill("def skill(agent):\n    while True:\n        yield 'noop'\n")
    slow = skill("def skill(agent):\n    yield 'noop'\n    x = 9 ** 9 ** 9\n    yield 'noop'\n", 2)
    for slot, record in ((0, good), (1, slow), (2, good)):
        assert executor.start(slot, record, "crafter", ACTIONS) is None
    assert all("action" in r for r in executor.advance({0: PERCEPTION, 1: PERCEPTION, 2: PERCEPTION}).values())
    results = executor.advance({0: PERCEPTION, 1: PERCEPTION, 2: PERCEPTION})
    assert results[1]["error"]["type"] == "Timeout" and results[1]["error"]["line"] == 3
    assert results[1]["error"]["code_line"] == "x = 9 ** 9 ** 9"
    for slot in (0, 2):
        error = results[slot]["error"]
        assert error["type"] == "Interrupted" and error["line"] == 0 and "env 1" in error["message"], error


def test_crash_message_names_the_skill_line_and_never_the_worker_code(executor) -> None:
    code = "def skill(agent):\n    yield 'noop'\n    x = sum(range(10 ** 10))\n    yield 'noop'\n"
    assert executor.start(0, skill(code), "crafter", ACTIONS) is None
    executor.advance({0: PERCEPTION})
    pid = executor.worker_pid
    killer = threading.Timer(0.3, os.kill, (pid, signal.SIGSEGV))
    killer.start()
    error = executor.advance({0: PERCEPTION})[0]["error"]
    killer.join()
    assert error["type"] == "WorkerCrashed" and "SIGSEGV" in error["message"], error
    assert error["line"] == 3 and error["code_line"] == "x = sum(range(10 ** 10))"
    assert "/" not in error["message"] and ".py" not in error["message"] and "File" not in error["message"]


@pytest.mark.parametrize("body", [
    "x = []\n    for _ in range(3000):\n        x = [x]\n    yield x\n",
    "x = []\n    for _ in range(3000):\n        x = [x]\n    raise ValueError(x)\n    yield 'noop'\n",
    "x = []\n    for _ in range(3000):\n        x = [x]\n    {}[x]\n    yield 'noop'\n",
])
def test_deeply_nested_values_do_not_kill_the_worker(executor, body: str) -> None:
    assert executor.start(0, skill("def skill(agent):\n    " + body), "crafter", ACTIONS) is None
    pid = executor.worker_pid
    error = executor.advance({0: PERCEPTION})[0]["error"]
    assert error["type"] in ("InvalidAction", "ValueError", "TypeError"), error
    assert "[[[" in error["message"] or error["type"] == "TypeError"
    assert executor.worker_pid == pid  # the same worker answered


@pytest.mark.parametrize("chain", ["map(abs, x)", "filter(None, x)", "zip(x)", "enumerate(x)", "(v for v in x)",
                                   "walk(x)", "relay(x)"])
def test_deep_iterator_chains_are_a_recursion_error_not_a_crash(chain: str) -> None:
    settings = EnvServerSettings(skill_call_seconds=20.0, skill_tick_budget=200000, skill_memory_mb=1024)
    ex = SkillExecutor(settings)
    code = ("def walk(it):\n    for v in it:\n        yield v\n"
            "def relay(it):\n    yield from it\n"
            "def skill(agent):\n    x = iter([1, 2])\n    for _ in range(150000):\n"
            f"        x = {chain}\n    y = list(x)\n    yield 'noop'\n")
    try:
        assert ex.start(0, skill(code), "crafter", ACTIONS) is None
        pid = ex.worker_pid
        error = ex.advance({0: PERCEPTION})[0]["error"]
        assert error["type"] == "RecursionError" and error["line"] in (2, 5, 9, 10), error
        assert ex.start(1, skill("def skill(agent):\n    yield 'do'\n", 2), "crafter", ACTIONS) is None
        assert ex.advance({1: PERCEPTION})[1]["action"] == "do"
        assert ex.worker_pid == pid  # no crash, no restart
    finally:
        ex.close()


def test_memory_budget_stops_idle_workers_and_refuses_when_all_are_busy() -> None:
    settings = EnvServerSettings(skill_call_seconds=2.0, skill_tick_budget=5000, skill_memory_mb=256,
                                 skill_memory_total_mb=512)
    budget = budget_for(settings)
    loop = skill("def skill(agent):\n    while True:\n        yield 'noop'\n")
    first, second, third = (SkillExecutor(settings) for _ in range(3))
    try:
        assert first.start(0, loop, "crafter", ACTIONS) is None
        assert second.start(0, loop, "crafter", ACTIONS) is None
        assert budget.used_mb == 512
        error = third.start(0, loop, "crafter", ACTIONS)
        assert error["type"] == "SandboxBusy" and "512 of 512 MiB" in error["message"], error
        first.stop([0])  # its worker is idle now: the budget may stop it for someone else
        assert third.start(0, loop, "crafter", ACTIONS) is None
        assert first.worker_pid is None and budget.used_mb == 512
        assert third.advance({0: PERCEPTION})[0]["action"] == "noop"
        assert second.advance({0: PERCEPTION})[0]["action"] == "noop"  # busy workers are never stopped
    finally:
        for ex in (first, second, third):
            ex.close()
    assert budget.used_mb == 0


def test_a_worker_that_died_on_its_own_frees_its_budget() -> None:
    settings = EnvServerSettings(skill_call_seconds=2.0, skill_memory_mb=256, skill_memory_total_mb=256)
    loop = skill("def skill(agent):\n    while True:\n        yield 'noop'\n")
    first, second = SkillExecutor(settings), SkillExecutor(settings)
    try:
        assert first.start(0, loop, "crafter", ACTIONS) is None
        pid = first.worker_pid
        os.kill(pid, signal.SIGKILL)
        _wait_dead(pid)
        assert second.start(0, loop, "crafter", ACTIONS) is None
        assert first.advance({0: PERCEPTION})[0]["error"]["type"] == "WorkerCrashed"
    finally:
        first.close()
        second.close()
