"""An LLM server process (llama.cpp, vLLM) dies with the process that started it: no orphan keeps its port and cores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

pytestmark = pytest.mark.timeout(120)

# A real OpenAI-compatible server (the relay) stands in for llama.cpp: what is tested is ServerProcess's start.
STARTER = textwrap.dedent("""
    import sys, time
    from rlgpt.llm.local_server import ServerProcess

    class Relay(ServerProcess):
        name = "relay"

        def command(self):
            return [sys.executable, "-m", "rlgpt.cli", "serve", "llm-relay", "--dir", sys.argv[1],
                    "--port", str(self.port)]

    server = Relay(start_seconds=60).start()
    print(server._process.pid, flush=True)
    time.sleep(600)
""")


def gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_the_server_exits_when_its_starter_is_killed(tmp_path) -> None:
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    server_pid = 0
    try:
        assert starter.stdout is not None
        server_pid = int(starter.stdout.readline())
        assert psutil.Process(server_pid).ppid() == starter.pid
        starter.kill()  # SIGKILL: the starter's stop() never runs
        starter.wait()
        assert gone(server_pid, 30), "the LLM server outlived the process that started it"
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()
        if server_pid and not gone(server_pid, 0.1):
            os.kill(server_pid, signal.SIGKILL)
