"""A job's files (config, state, progress, errors) and the local runner's process handle."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from services.learner.jobs import (
    LocalRunner,
    wait_for_exit,
)


def test_wait_for_exit_returns_the_code_or_none_after_the_time(tmp_path: Path) -> None:
    runner = LocalRunner()
    quick = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    handle = _handle(runner, quick)
    assert wait_for_exit(handle, 10) == 3
    slow = _handle(runner, subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                            start_new_session=True))
    start = time.monotonic()
    assert wait_for_exit(slow, 0.3) is None
    assert 0.3 <= time.monotonic() - start < 2
    slow.kill()
    assert slow.poll() == -9 and "local pid" in slow.describe()
    slow.kill()  # killing an ended process is harmless


def _handle(runner: LocalRunner, process: subprocess.Popen):
    """The local runner's handle around a process the test started (its launch always runs train_command)."""
    from services.learner.jobs import LocalHandle

    return LocalHandle(process)
