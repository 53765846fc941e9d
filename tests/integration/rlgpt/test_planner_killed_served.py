"""The planner SIGKILLed while `rlgpt run --planner` follows its run (issue 38, item 6): the command says which service
failed, at which address, and how to resume, and exits 1 without a traceback (it ended in a raw gRPC traceback from
its WatchRun loop). The `rlgpt` command as a process, real services on loopback, a scripted LLM (test double)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from fault_support import killable_services

pytestmark = pytest.mark.timeout(600)


def test_a_dead_planner_is_named_with_how_to_resume(tmp_path) -> None:
    with killable_services(tmp_path, victim="planner", delay=1.0) as services:
        planner = services.planner
        done = subprocess.run(
            [sys.executable, "-m", "rlgpt.app.cli", "run", "--planner", planner, "--task", "collect_wood",
             "--runs-dir", str(tmp_path / "client"), "--outer", "1", "--inner", "1", "--candidates", "1",
             "--eval-episodes", "2", "--total-frames", "6000", "--seed", "3"],
            capture_output=True, text=True, timeout=300)
        assert services.script.killed.is_set()
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    error = done.stderr[done.stderr.index("error: "):]
    flat = " ".join(error.split())  # the console wraps long lines
    assert flat.startswith(f"error: the planner at {planner} is unavailable (WatchRun: UNAVAILABLE: "), flat
    assert re.search(rf"run \S+ stopped with it, its state kept up to its last step\. Resume with: rlgpt run "
                     rf"--resume \S+ --planner {planner} once the planner is back$", flat), flat
