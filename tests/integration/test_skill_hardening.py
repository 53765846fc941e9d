"""Skill sandbox hardening over a real gRPC channel: each bad input gets its status code or per-env error,
and the server still serves normal requests afterwards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import grpc
import pytest
from env_server_support import assert_health_serving, rpc_error
from sandbox_support import DEEP_NESTING

from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.skills.pool import budget_for

N_PRIMITIVES = 17  # Crafter's actions come first in a session's action space, then its skills in order
# A session whose envs start with 9 wood reaches branches that RegisterSkill's test worlds (empty inventory) do not.
RICH_TASK = common_pb2.TaskSpec(name="collect_wood", start_inventory=[common_pb2.ItemCount(item="wood", count=9)])
IF_RICH = " if agent.inventory['wood'] >= 9 else 0"
LOOP = "def skill(agent):\n    while True:\n        yield 'noop'\n"


def assert_serves(env_server) -> None:
    """Health says SERVING, and a session steps and a skill registers and runs."""
    assert_health_serving(env_server)
    stub = env_server.stub
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="hardening_ok", code="def skill(agent):\n    yield 'do'\n",
                                                    replace=True))
    session = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, skills=["hardening_ok"]))
    step = stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=[N_PRIMITIVES]))
    assert not step.infos[0].HasField("skill_error") and step.frames[0] == 1
    stub.CloseSession(env_pb2.CloseSessionRequest(session_id=session.session_id))


def register(env_server, name: str, code: str) -> None:
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))


def rich_session(env_server, skills: list[str], num_envs: int = 1, steps: int = 10) -> str:
    return env_server.stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=num_envs, skills=skills, skill_max_steps=steps, task=RICH_TASK)).session_id


def worker_pid(env_server, session_id: str, timeout: float = 10.0) -> int:
    """The pid of the session's sandbox worker, once it has one."""
    session = env_server.servicer.sessions.get(session_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executor = session._executor
        pid = executor.worker_pid if executor is not None else None
        if pid:
            return pid
        time.sleep(0.01)
    raise AssertionError("the session never started a sandbox worker")


def step_killing_the_worker(env_server, session_id: str, signum: int) -> common_pb2.SkillError:
    """Steps the session's first skill while its sandbox worker gets ``signum`` half a second in; the skill
    error of env 0."""
    killer = threading.Thread(target=lambda: (time.sleep(0.5), os.kill(worker_pid(env_server, session_id), signum)))
    killer.start()
    step = env_server.stub.Step(env_pb2.StepRequest(session_id=session_id, actions=[N_PRIMITIVES]))
    killer.join()
    return step.infos[0].skill_error


pytestmark = pytest.mark.usefixtures("no_leftover_sessions")


# --- deep nesting in the source --------------------------------------------------------------------
@pytest.mark.parametrize("expression", DEEP_NESTING.values(), ids=DEEP_NESTING.keys())
def test_deeply_nested_source_is_invalid_argument(env_server, expression: str) -> None:
    code = f"def skill(agent):\n    x = {expression}\n    yield 'noop'\n"
    status, details = rpc_error(env_server.stub.RegisterSkill, env_pb2.RegisterSkillRequest(name="deep", code=code))
    assert status == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "nest" in details or "parenthes" in details
    assert_serves(env_server)


# --- deep values inside the worker -----------------------------------------------------------------
DEEP = "    x = []\n    for _ in range(3000):\n        x = [x]\n"


@pytest.mark.parametrize(("tail", "kind"), [
    ("    yield x\n", "InvalidAction"),
    ("    assert not x, x\n    yield 'noop'\n", "AssertionError"),
    ("    yield {x: 1}\n", "TypeError"),
])
def test_deeply_nested_values_are_reported_not_fatal(env_server, tail: str, kind: str) -> None:
    code = "def skill(agent):\n" + DEEP + tail
    status, details = rpc_error(env_server.stub.RegisterSkill,
                                env_pb2.RegisterSkillRequest(name=f"deep_{kind.lower()}", code=code))
    assert status == grpc.StatusCode.INVALID_ARGUMENT, details
    assert kind in details and "line 5" in details and "WorkerCrashed" not in details, details
    assert_serves(env_server)


def test_a_skills_own_raise_of_a_deep_value_is_a_game_outcome_not_fatal(env_server) -> None:
    # The skill's own `raise` is it giving up on this world (like dying), so registration accepts it;
    # the deep value it carries must not take the worker or the server down on the way.
    code = "def skill(agent):\n    yield 'noop'\n" + DEEP + "    raise ValueError(x)\n"
    reply = env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="deep_give_up", code=code))
    assert reply.skill.name == "deep_give_up" and reply.skill.version == 1
    assert_serves(env_server)


def test_a_skills_own_raise_on_the_line_of_an_if_is_accepted_even_before_its_first_action(env_server) -> None:
    # Registration's test worlds start with nothing held: a skill that gives up there at once, with its raise on
    # the line of its `if`, gave up; it made no code error (run 6's diamond skill was refused for this).
    code = ("def skill(agent):\n    if agent.inventory.get('iron_pickaxe', 0) < 1: raise ValueError('no pickaxe')\n"
            "    yield 'noop'\n")
    reply = env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="give_up_inline", code=code))
    assert reply.skill.name == "give_up_inline"
    # A plain return there is refused, and the refusal names registration's own world and the way that is accepted.
    code = "def skill(agent):\n    if agent.inventory.get('iron_pickaxe', 0) < 1:\n        return\n    yield 'noop'\n"
    status, details = rpc_error(env_server.stub.RegisterSkill,
                                env_pb2.RegisterSkillRequest(name="return_inline", code=code))
    assert status == grpc.StatusCode.INVALID_ARGUMENT
    assert ("in registration's test run, on fresh world 0 (the game's start, nothing an earlier sub-task makes) "
            "(NoYield)") in details and "`raise ValueError(\"...\")` (its own raise is accepted" in details, details


@pytest.mark.parametrize("chain", ["map(abs, x)", "zip(x)", "enumerate(x)", "filter(None, x)", "(v for v in x)"])
def test_150000_deep_iterator_chain_is_a_recursion_error(env_server, chain: str) -> None:
    code = ("def skill(agent):\n    x = iter([1, 2])\n    for i in range(150000):\n"
            f"        x = {chain}\n        if i % 10000 == 0:\n            yield 'noop'\n"
            "    y = list(x)\n    yield 'noop'\n")
    status, details = rpc_error(env_server.stub.RegisterSkill, env_pb2.RegisterSkillRequest(name="chain", code=code))
    assert status == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "RecursionError" in details and ("line 7" in details or "line 4" in details), details
    assert_serves(env_server)


# --- lost workers: crash messages, batch blame, kills between requests -----------------------------
def test_crashed_worker_is_reported_with_the_skill_line_only(env_server) -> None:
    code = "def skill(agent):\n    yield 'noop'\n    x = sum(range(10 ** 10))" + IF_RICH + "\n    yield 'noop'\n"
    register(env_server, "crash_rich", code)
    error = step_killing_the_worker(env_server, rich_session(env_server, ["crash_rich"]), signal.SIGSEGV)
    assert error.type == "WorkerCrashed" and "SIGSEGV" in error.message, error
    assert error.line == 3 and error.code_line.startswith("x = sum(range(10 ** 10))")
    assert "/" not in error.message and ".py" not in error.message and "File " not in error.message
    assert_serves(env_server)


def test_timeout_in_a_batch_blames_only_its_own_env(env_server) -> None:
    register(env_server, "loops", LOOP)
    register(env_server, "slow_rich", "def skill(agent):\n    yield 'noop'\n    n = 10 ** 10 ** 9" + IF_RICH +
             "\n    yield 'noop'\n")
    session_id = rich_session(env_server, ["loops", "slow_rich"], num_envs=3)
    step = env_server.stub.Step(env_pb2.StepRequest(
        session_id=session_id, actions=[N_PRIMITIVES, N_PRIMITIVES + 1, N_PRIMITIVES]))
    slow = step.infos[1].skill_error
    assert slow.type == "Timeout" and slow.line == 3 and slow.code_line.startswith("n = 10 ** 10 ** 9"), slow
    for i in (0, 2):
        other = step.infos[i].skill_error
        assert other.type == "Interrupted" and other.line == 0 and "env 1" in other.message, other
    step = env_server.stub.Step(env_pb2.StepRequest(session_id=session_id, actions=[N_PRIMITIVES] * 3))
    assert all(not info.HasField("skill_error") for info in step.infos)
    assert_serves(env_server)


def test_worker_killed_during_a_step_is_a_crash_with_the_signal(env_server) -> None:
    code = ("def skill(agent):\n    while True:\n        x = sum(range(2 * 10 ** 6))" + IF_RICH +
            "\n        yield 'noop'\n")
    register(env_server, "busy_rich", code)
    error = step_killing_the_worker(env_server, rich_session(env_server, ["busy_rich"], steps=200), signal.SIGKILL)
    assert error.type == "WorkerCrashed" and "SIGKILL" in error.message, error
    assert "NotStarted" not in error.message
    assert_serves(env_server)


# --- the memory budget ---------------------------------------------------------------------------
class _Hog:
    """Holds budget and never gives it back (a stand-in for busy workers of other users)."""

    def release_if_idle(self) -> bool:
        return False


def test_full_memory_budget_is_resource_exhausted_then_recovers(env_server) -> None:
    register(env_server, "loops", LOOP)
    budget = budget_for(env_server.servicer.settings)
    session_id = rich_session(env_server, ["loops"])
    hog = budget.reserve(_Hog(), budget.total_mb - budget.used_mb)
    try:
        status, details = rpc_error(env_server.stub.RegisterSkill,
                                    env_pb2.RegisterSkillRequest(name="loops", code=LOOP, replace=True))
        assert status == grpc.StatusCode.RESOURCE_EXHAUSTED and "SKILL_MEMORY_TOTAL_MB" in details, details
        step = env_server.stub.Step(env_pb2.StepRequest(session_id=session_id, actions=[N_PRIMITIVES]))
        assert step.infos[0].skill_error.type == "SandboxBusy" and step.frames[0] == 1
    finally:
        hog.release()
    step = env_server.stub.Step(env_pb2.StepRequest(session_id=session_id, actions=[N_PRIMITIVES]))
    assert not step.infos[0].HasField("skill_error")
    assert_serves(env_server)


# --- OS isolation of the workers -------------------------------------------------------------------
_JOIN_AND_CONNECT = """
import ctypes, socket, sys
with open(f"/proc/{sys.argv[1]}/ns/net") as ns:
    if ctypes.CDLL(None, use_errno=True).setns(ns.fileno(), 0x40000000) != 0:
        sys.exit(3)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=2).close()
except OSError:
    sys.exit(0)
sys.exit(1)
"""


def _can_unshare_network() -> bool:
    probe = "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x40000000) != 0)"
    return subprocess.run([sys.executable, "-c", probe], check=False).returncode == 0


def test_workers_report_their_isolation_and_it_holds(env_server) -> None:
    register(env_server, "loops", LOOP)
    session_id = rich_session(env_server, ["loops"])
    env_server.stub.Step(env_pb2.StepRequest(session_id=session_id, actions=[N_PRIMITIVES]))
    executor = env_server.servicer.sessions.get(session_id)._executor
    pid, report = executor.worker_pid, executor.isolation
    assert {"network", "user", "no_new_privs", "no_forks", "no_core_dumps", "no_file_writes"} <= set(report)
    if os.geteuid() == 0:
        assert report["user"] and report["uid"] == env_server.servicer.settings.skill_worker_uid, report
    with open(f"/proc/{pid}/status") as status:
        uids = next(line for line in status if line.startswith("Uid:")).split()[1:]
    assert all(int(uid) == report["uid"] for uid in uids)
    if _can_unshare_network():
        assert report["network"], report
    if report["network"]:
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from the server's namespace
            joined = subprocess.run([sys.executable, "-c", _JOIN_AND_CONNECT, str(pid), str(port)], check=False)
        assert joined.returncode == 0, "a connection from the worker's network namespace went through"
    assert_serves(env_server)


# --- RegisterSkill runs the candidate for several hundred frames -----------------------------------
def test_bug_after_fifty_steps_is_refused_at_registration_with_its_line(env_server) -> None:
    code = ("def skill(agent):\n    while True:\n        if agent.steps >= 50:\n            x = {}['missing']\n"
            "        yield 'noop'\n")
    status, details = rpc_error(env_server.stub.RegisterSkill, env_pb2.RegisterSkillRequest(name="late", code=code))
    assert status == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "KeyError at line 4" in details and "after 50 steps" in details and "[x = {}['missing']]" in details
    status, _ = rpc_error(env_server.stub.RunSkill, env_pb2.RunSkillRequest(skill="late", episodes=1))
    assert status == grpc.StatusCode.NOT_FOUND


def test_timeout_after_thirty_steps_is_deadline_exceeded(env_server) -> None:
    code = ("def skill(agent):\n    while True:\n        if agent.steps >= 30:\n            n = 10 ** 10 ** 9\n"
            "        yield 'noop'\n")
    status, details = rpc_error(env_server.stub.RegisterSkill,
                                env_pb2.RegisterSkillRequest(name="late_slow", code=code))
    assert status == grpc.StatusCode.DEADLINE_EXCEEDED and "line 4" in details, details
    assert_serves(env_server)


def test_a_skill_that_finishes_after_yielding_registers(env_server) -> None:
    code = "def skill(agent):\n    for _ in range(3):\n        yield 'noop'\n"
    reply = env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="short", code=code, replace=True))
    assert reply.skill.name == "short"


def test_the_test_run_stays_within_its_time_budget(env_server) -> None:
    began = time.monotonic()
    register(env_server, "loops", LOOP)
    settings = env_server.servicer.settings
    assert time.monotonic() - began < settings.skill_probe_seconds + settings.skill_call_seconds + 5

