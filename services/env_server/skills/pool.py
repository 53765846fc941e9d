"""Sandbox worker processes: starting, talking to and losing one, and the server-wide memory budget.

A worker (``python -m services.env_server.skills.worker``) gets an address-space limit of
``skill_memory_mb``; all workers of one server together may reserve at most
``skill_memory_total_mb``. A new worker past the budget first stops idle workers of other users
(least recently used first; their next step simply starts a fresh one), and only when none is idle
is it refused with :class:`SandboxBusy`.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from rlgpt.text import encodable_tree
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.stderr_tail import StderrTail
from services.env_server.skills.worker import _HEADER, IDLE, MARKER, MAX_MESSAGE

log = logging.getLogger(__name__)
_PROJECT_ROOT = str(Path(__file__).resolve().parents[3])
_SKILL_FRAME = re.compile(r'File "<skill>", line (\d+)')
_DUMP_HEADER = re.compile(r"^(Current thread|Thread|Stack) .*\(most recent call first\):")
_FATAL = re.compile(r"^Fatal Python error: ([A-Za-z ]{1,60})")
_logged_isolation: set[str] = set()
REPLY_TEXT_CHARS = 4000
"""Longest text kept from a worker's reply (an error's message, its code line); the worker cuts a message to 2,000
characters itself, but the server does not trust what comes back."""


class WorkerFailure(Exception):
    """The worker was lost: ``kind`` is Timeout, WorkerCrashed or SandboxBusy.

    ``slot`` is the slot the worker was running when it was lost (-1: none or unknown), ``line`` the
    skill line it was on (best effort).
    """

    def __init__(self, kind: str, message: str, line: int = 0, slot: int = IDLE):
        super().__init__(message)
        self.kind = kind
        self.line = line
        self.slot = slot


class SandboxBusy(WorkerFailure):
    """No room in the server's sandbox memory budget and no idle worker to stop."""

    def __init__(self, message: str):
        super().__init__("SandboxBusy", message)


class Holder(Protocol):
    def release_if_idle(self) -> bool:
        """Stops the holder's worker if it is not in use; True when it did."""


class Lease:
    """``mb`` of the budget held by one worker process; released once, when the process goes."""

    def __init__(self, budget: MemoryBudget, holder: Holder, mb: int):
        self.budget = budget
        self.holder = holder
        self.mb = mb
        self.last_used = time.monotonic()
        self.alive: Callable[[], bool] = lambda: True
        self.released = False

    def release(self) -> None:
        self.budget._release(self)


class MemoryBudget:
    """Memory reserved by the sandbox workers of one server."""

    def __init__(self, total_mb: int):
        self.total_mb = total_mb
        self._lock = threading.RLock()
        self._leases: list[Lease] = []

    @property
    def used_mb(self) -> int:
        with self._lock:
            return sum(lease.mb for lease in self._leases)

    def reserve(self, holder: Holder, mb: int) -> Lease:
        """A lease for a new worker of ``holder``; raises SandboxBusy when the budget cannot make room."""
        with self._lock:
            for lease in [lease for lease in self._leases if not lease.alive()]:
                self._release(lease)  # a worker that died on its own no longer uses memory
            candidates = sorted((lease for lease in self._leases if lease.holder is not holder),
                                key=lambda lease: lease.last_used)
            while self.used_mb + mb > self.total_mb and candidates:
                candidates.pop(0).holder.release_if_idle()  # releases its lease when it stops its worker
            if self.used_mb + mb > self.total_mb:
                raise SandboxBusy(f"the server's sandbox memory budget is in use: {len(self._leases)} skill workers "
                                  f"hold {self.used_mb} of {self.total_mb} MiB (RLGPT_ENV_SKILL_MEMORY_TOTAL_MB) and "
                                  f"each needs {mb} MiB; retry when other sessions have finished their steps or "
                                  "closed")
            lease = Lease(self, holder, mb)
            self._leases.append(lease)
            return lease

    def _release(self, lease: Lease) -> None:
        with self._lock:
            if not lease.released:
                lease.released = True
                self._leases.remove(lease)


_budgets: dict[EnvServerSettings, MemoryBudget] = {}
_budgets_lock = threading.Lock()


def budget_for(settings: EnvServerSettings) -> MemoryBudget:
    """The budget shared by every executor built from these settings (one server's)."""
    with _budgets_lock:
        budget = _budgets.get(settings)
        if budget is None:
            budget = _budgets[settings] = MemoryBudget(settings.skill_memory_total_mb)
        return budget


def _marker_fd() -> int:
    """A file descriptor of 8 shared bytes: anonymous memory where the OS has it, else an unlinked temp file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("rlgpt-sandbox-slot")
    else:
        handle, path = tempfile.mkstemp(prefix="rlgpt-sandbox-slot-")
        os.unlink(path)
        fd = handle
    os.ftruncate(fd, MARKER.size)
    return fd


def _exit_text(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class SandboxProcess:
    """One worker process, its pipes, its slot marker and its lease of the memory budget."""

    def __init__(self, settings: EnvServerSettings, lease: Lease):
        self._lease = lease
        marker_fd = _marker_fd()
        self._marker = mmap.mmap(marker_fd, MARKER.size)
        MARKER.pack_into(self._marker, 0, IDLE)
        env = dict(os.environ)
        env["PYTHONPATH"] = _PROJECT_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        config = {"memory_mb": settings.skill_memory_mb, "tick_budget": settings.skill_tick_budget,
                  "slot_fd": marker_fd, "isolate": settings.skill_isolation, "uid": settings.skill_worker_uid}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "services.env_server.skills.worker", json.dumps(config)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=_PROJECT_ROOT,
                start_new_session=True, pass_fds=(marker_fd,))
        finally:
            os.close(marker_fd)
        lease.alive = self.alive
        self.stderr_tail = StderrTail()
        """The newest lines of the worker's stderr, bounded in bytes (a skill controls what it writes there)."""
        self._stderr_thread = threading.Thread(target=self.stderr_tail.drain, args=(self._proc.stderr,), daemon=True,
                                               name="sandbox-stderr")
        self._stderr_thread.start()
        self.pid = self._proc.pid
        try:
            reply = self.request({"op": "ping"}, settings.skill_worker_start_seconds)
        except WorkerFailure:
            self.kill()
            raise
        self.isolation: dict[str, Any] = reply.get("isolation") or {}
        summary = json.dumps(self.isolation, sort_keys=True)
        if summary not in _logged_isolation:
            _logged_isolation.add(summary)
            log.info("sandbox workers run isolated as: %s", summary)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def touch(self) -> None:
        self._lease.last_used = time.monotonic()

    def running_slot(self) -> int:
        """The slot the worker said it is running (IDLE between slots)."""
        try:
            return MARKER.unpack_from(self._marker, 0)[0]
        except ValueError:  # closed
            return IDLE

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Sends one message and waits for the reply; kills the worker and raises WorkerFailure past ``timeout``."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self.touch()
        payload = json.dumps(message, separators=(",", ":")).encode()
        try:
            self._proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self.crashed(f"cannot write to the sandbox worker ({exc.strerror or exc})") from None
        deadline = time.monotonic() + timeout
        header = self._read_exact(_HEADER.size, deadline)
        (size,) = _HEADER.unpack(header)
        if size > MAX_MESSAGE:
            raise self.crashed(f"the sandbox worker sent an oversized reply ({size} bytes)")
        body = self._read_exact(size, deadline)
        try:
            # What the skill wrote (its errors' messages) becomes proto fields: UTF-8, and bounded.
            reply = encodable_tree(json.loads(body), REPLY_TEXT_CHARS)
        except (ValueError, RecursionError):
            reply = None
        if not isinstance(reply, dict):
            raise self.crashed("the sandbox worker sent a malformed reply")
        return reply

    def _read_exact(self, size: int, deadline: float) -> bytes:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            wait = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, wait))
            if not ready:
                raise self._timed_out()
            chunk = os.read(fd, remaining)
            if not chunk:
                raise self.crashed("the sandbox worker exited")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _skill_line_in_dump(self) -> int:
        """Innermost skill line of the last stack dump faulthandler wrote to stderr (0 if none)."""
        lines = self.stderr_tail.lines()
        start = max((i for i, text in enumerate(lines) if _DUMP_HEADER.match(text.strip())), default=-1)
        if start < 0:
            return 0
        for text in lines[start + 1:]:
            match = _SKILL_FRAME.search(text)
            if match:
                return int(match.group(1))
        return 0

    def _timed_out(self) -> WorkerFailure:
        # Ask faulthandler for the stack first: it names the skill line even inside a long C call.
        slot = self.running_slot()
        try:
            os.kill(self._proc.pid, signal.SIGUSR1)
            time.sleep(0.2)
        except ProcessLookupError:
            pass
        line = self._skill_line_in_dump()
        self.kill()
        return WorkerFailure("Timeout", "the skill ran past its wall-clock limit without yielding; its sandbox "
                             "worker was killed and replaced", line, slot)

    def crashed(self, message: str) -> WorkerFailure:
        """Kills what is left of the worker and describes its end from its exit status and its own stack dump.

        Only the skill's lines are ever quoted: the worker's stderr may hold paths and lines of the server's code.
        """
        slot = self.running_slot()
        self.kill()
        self._stderr_thread.join(timeout=2)  # the dump faulthandler wrote just before the end
        fatal = next((m.group(1).strip() for m in map(_FATAL.match, self.stderr_tail.lines()) if m), "")
        line = self._skill_line_in_dump() if fatal else 0
        details = _exit_text(self._proc.returncode) + (f", {fatal}" if fatal else "")
        if fatal == "Segmentation fault":
            details += " (e.g. a C stack overflow from very deep nesting)"
        return WorkerFailure("WorkerCrashed", f"{message}: {details}", line, slot)

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.error("sandbox worker %d did not exit after SIGKILL", self._proc.pid)
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self._marker.close()
        self._lease.release()

    def returncode(self) -> int | None:
        return self._proc.poll()
