"""One seed of bench-run: `rlgpt run --seed S --runs-dir DIR`, as `make run` runs it, in a process of its own.

Its output goes to ``DIR/rlgpt-run.log``; a watchdog interrupts it past its time (SIGINT to its process group:
the run stops cleanly and saves its state, as Ctrl-C would), then kills the group if it has not ended. The services
it starts have process groups of their own and die with it (rlgpt.processes.die_with_parent).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT
from benchmarks.run.reading import find_run_dir, read_run

log = logging.getLogger("benchmarks.run")
LOG_NAME = "rlgpt-run.log"
RECORD_NAME = "bench-run.json"
"""A finished seed's raw record in its runs directory: a bench started again with the same --work reuses it."""
POLL_SECONDS = 5.0
STOP_GRACE_SECONDS = 120.0
"""Time an interrupted run gets to stop cleanly (state saved, report fetched) before its group is killed."""
LOG_TAIL_LINES = 15
"""Lines of the log kept in the raw results of a run that failed or timed out."""
OWN_FLAGS = ("--seed", "--runs-dir", "--resume", "--planner", "--replay")
"""rlgpt-run flags the bench sets (or that would make it something other than `make run`): not allowed in
--extra."""


def rlgpt_executable() -> Path:
    """The ``rlgpt`` command of the venv this bench runs in (``make run`` runs ``.venv/bin/rlgpt``)."""
    return Path(sys.executable).parent / "rlgpt"


def shown_path(path: Path) -> str:
    """``path`` relative to the repository when inside it (how the raw results and section name it)."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def command_of(rlgpt: Path, seed: int, runs_dir: Path, extra: list[str]) -> list[str]:
    return [str(rlgpt), "run", "--seed", str(seed), "--runs-dir", str(runs_dir), *extra]


def refused_extra(extra: list[str]) -> str:
    """The first flag of ``extra`` the bench does not pass through, or ""."""
    return next((arg for arg in extra if arg.split("=", 1)[0] in OWN_FLAGS), "")


def frames_so_far(runs_dir: Path) -> int | None:
    """Frames the run has spent so far (its state.json), or None before it has one."""
    run_dir = find_run_dir(runs_dir)
    try:
        return int(json.loads((run_dir / "state.json").read_text()).get("frames_used", 0)) if run_dir else None
    except (OSError, ValueError):  # not written yet, or being replaced: read again at the next poll
        return None


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the process leads its own group (start_new_session)
    except ProcessLookupError:
        pass


def stop(process: subprocess.Popen) -> None:
    """SIGINT to the run's group (a clean stop), then SIGKILL to the group: after STOP_GRACE_SECONDS if the run
    has not ended, at once otherwise (what is left of the group)."""
    _signal_group(process, signal.SIGINT)
    try:
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        log.warning("the run did not stop within %.0f s of SIGINT: killing its process group", STOP_GRACE_SECONDS)
    _signal_group(process, signal.SIGKILL)
    process.wait()


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    text = path.read_text(errors="replace") if path.exists() else ""
    return [line.rstrip()[:300] for line in text.splitlines() if line.strip()][-lines:]


def run_seed(seed: int, runs_dir: Path, extra: list[str], timeout_seconds: float,
             on_poll: Callable[[int], None] = lambda frames: None, rlgpt: Path | None = None) -> dict[str, Any]:
    """Runs `rlgpt run` for ``seed`` in ``runs_dir`` (a fresh directory), waits for it (``on_poll`` gets its
    frames so far every few seconds), reads what it did back from its files and saves that record in
    ``runs_dir``; returns the record."""
    command = command_of(rlgpt or rlgpt_executable(), seed, runs_dir.resolve(), extra)
    runs_dir.mkdir(parents=True, exist_ok=True)
    log_path = runs_dir / LOG_NAME
    log.info("seed %d: %s (log %s)", seed, shlex.join(command), log_path)
    started, timed_out = time.monotonic(), False
    with log_path.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=REPO_ROOT, start_new_session=True)
        try:
            while process.poll() is None:
                if time.monotonic() - started > timeout_seconds:
                    timed_out = True
                    log.warning("seed %d: past %g min, stopping it", seed, timeout_seconds / 60)
                    stop(process)
                    break
                if (frames := frames_so_far(runs_dir)) is not None:
                    on_poll(frames)
                time.sleep(POLL_SECONDS)
        except BaseException:  # the bench itself interrupted: the run goes with it
            stop(process)
            raise
    wall = time.monotonic() - started
    returncode = process.returncode
    record: dict[str, Any] = {
        "seed": seed, "command": shlex.join([shown_path(Path(command[0])), *command[1:4], "--runs-dir",
                                          shown_path(runs_dir), *extra]),
        "runs_dir": shown_path(runs_dir), "log": shown_path(log_path), "returncode": returncode,
        "timed_out": timed_out, "timeout_seconds": timeout_seconds, "wall_seconds": round(wall, 1),
        **read_run(runs_dir)}
    if timed_out or returncode != 0:
        record["log_tail"] = log_tail(log_path)
    (runs_dir / RECORD_NAME).write_text(json.dumps(record, indent=1) + "\n")
    on_poll(record.get("frames_used", 0))
    return record


def saved_record(runs_dir: Path) -> dict[str, Any] | None:
    """The record a finished seed saved in ``runs_dir``, or None."""
    path = runs_dir / RECORD_NAME
    return json.loads(path.read_text()) if path.exists() else None
