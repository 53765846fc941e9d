"""Test helpers for processes that must not outlive the process that started them."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil


def gone(pid: int, seconds: float) -> bool:
    """Whether ``pid`` exits (or is left a zombie for init to reap) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def assert_child_dies_with_starter(argv: list[str], what: str, seconds: float = 30) -> None:
    """Runs ``argv`` (a starter that prints the pid of the child it started, then waits), SIGKILLs the starter,
    so nothing of its own runs, and asserts the child exits; an orphan left by a failing test is killed."""
    starter = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert starter.stdout is not None
        child = int(starter.stdout.readline())
        assert psutil.Process(child).ppid() == starter.pid
        starter.kill()
        starter.wait()
        assert gone(child, seconds), f"the {what} outlived the process that started it"
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()
        if child and not gone(child, 0.1):
            os.kill(child, signal.SIGKILL)
