"""The launcher starts real ``rlgpt serve`` processes, stops them, and never leaves one behind its starter."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from process_support import assert_child_dies_with_starter, gone

from rlgpt.app.launcher import start_service
from rlgpt.errors import Unavailable
from rlgpt.grpc_client import create_channel

pytestmark = pytest.mark.timeout(300)


def test_a_started_service_answers_reads_its_environment_and_stops(tmp_path) -> None:
    service = start_service("env", tmp_path / "logs", metrics_port=-1, env={"RLGPT_TEST_MARK": "launcher"})
    try:
        assert service.name == "env" and service.port > 0 and service.metrics_port == -1
        assert service.target == f"127.0.0.1:{service.port}" and service.log_path == tmp_path / "logs" / "env.log"
        assert "RLGPT_TEST_MARK=launcher" in Path(f"/proc/{service.process.pid}/environ").read_bytes().decode(
            errors="replace").split("\0")
        assert os.getsid(service.process.pid) == service.process.pid  # its own session: Ctrl-C reaches only us
        channel = create_channel(service.target, wait_ready_seconds=10)
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        finally:
            channel.close()
    finally:
        service.stop()
    assert service.process.returncode is not None
    service.stop()  # a second stop is fine


def test_a_service_that_cannot_start_is_reported_with_its_log(tmp_path) -> None:
    with pytest.raises(Unavailable, match=r"service no_such_service exited \(rc=2\) before it was ready") as raised:
        start_service("no_such_service", tmp_path)
    assert str(tmp_path / "no_such_service.log") in str(raised.value)


STARTER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from rlgpt.app.launcher import start_service

    service = start_service("env", Path(sys.argv[1]), metrics_port=-1)
    print(service.process.pid, flush=True)
    time.sleep(600)
""")


def test_a_service_exits_when_the_process_that_started_it_dies(tmp_path) -> None:
    assert_child_dies_with_starter([sys.executable, "-c", STARTER, str(tmp_path)], "service")
    log_text = (tmp_path / "env.log").read_text()
    assert "Traceback" not in log_text  # it shut down on SIGTERM, as on a clean stop


STUBBORN = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as a server that finishes its answer in flight first
    Path(sys.argv[1]).touch()
    time.sleep(600)
""")

STUBBORN_STARTER = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    from pathlib import Path
    from rlgpt.processes import die_with_parent

    folder = Path(sys.argv[1])
    child = subprocess.Popen(die_with_parent([sys.executable, "-m", "stubborn", str(folder / "ready")],
                                             signal.SIGKILL), env={**os.environ, "PYTHONPATH": str(folder)})
    while not (folder / "ready").exists():
        time.sleep(0.05)
    print(child.pid, flush=True)
    time.sleep(600)
""")


def test_a_child_that_ignores_sigterm_is_killed_when_its_starter_dies(tmp_path) -> None:
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    assert_child_dies_with_starter([sys.executable, "-c", STUBBORN_STARTER, str(tmp_path)], "stubborn child", 10)


def test_stop_kills_a_service_that_does_not_stop_on_sigterm(tmp_path, caplog) -> None:
    service = start_service("env", tmp_path, metrics_port=-1)
    os.kill(service.process.pid, signal.SIGSTOP)  # a stopped process cannot act on SIGTERM
    try:
        service.stop(grace_seconds=1)
    finally:
        if service.process.poll() is None:
            os.kill(service.process.pid, signal.SIGKILL)
    assert service.process.returncode is not None and gone(service.process.pid, 5)
    assert "env did not stop within 1 s; killing it" in caplog.text


def test_the_local_services_start_one_env_server_per_core_unless_told(monkeypatch) -> None:
    from rlgpt.app.runner import RunOptions, env_server_count

    options = RunOptions(task="collect_wood", success="", mode="pure-rl", agents="one", resume=None,
                         runs_dir=Path("runs"))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert env_server_count(options) == 3
    options.env_servers = 1
    assert env_server_count(options) == 1
