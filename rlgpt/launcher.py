"""Starts rlgpt services as local processes on loopback and stops them cleanly.

A started service dies with its starter: on Linux the child asks the kernel for SIGTERM when its parent
dies (``PR_SET_PDEATHSIG``), so a starter killed with SIGKILL, or one that crashes before its ``finally``,
leaves no service behind. The kernel counts the *thread* that started it as the parent: start services
from a thread that outlives them (the main thread, as the runner, the benchmarks and tests do).
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rlgpt.errors import Unavailable

log = logging.getLogger(__name__)
_READY = re.compile(r"RLGPT_READY service=(\w+) port=(\d+) metrics_port=(-?\d+)")
_PR_SET_PDEATHSIG = 1


def parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGTERM when its parent dies; None off Linux.

    libc and ``prctl`` are looked up here, in the parent, so the forked child only makes the call.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return die_with_parent


@dataclass
class ServiceProcess:
    """A running ``rlgpt serve <name>`` process and the ports it bound."""

    name: str
    process: subprocess.Popen
    port: int
    metrics_port: int
    """-1 when the service serves no metrics."""
    log_path: Path

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, grace_seconds: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_seconds``; safe to call twice."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0f s; killing it", self.name, grace_seconds)
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_service(name: str, log_dir: Path, *, extra_args: tuple[str, ...] = (), metrics_port: int = 0,
                  env: Mapping[str, str] | None = None, start_timeout: float = 120.0) -> ServiceProcess:
    """Runs ``rlgpt serve NAME --port 0`` and waits for its ready line; its stderr goes to ``log_dir/NAME.log``.

    ``env`` adds to (or overrides) this process's environment. The service runs in its own session, so a
    Ctrl-C at the terminal reaches only its starter, which stops it; it gets SIGTERM if the starter dies.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    stderr = log_path.open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "rlgpt.cli", "serve", name, "--port", "0", "--metrics-port", str(metrics_port),
         *extra_args],
        stdout=subprocess.PIPE, stderr=stderr, text=True, env={**os.environ, **(env or {})},
        start_new_session=True, preexec_fn=parent_death_signal())
    stderr.close()
    found: list[re.Match[str]] = []

    def read_ready() -> None:
        # A thread, because reading the pipe cannot time out by itself.
        assert process.stdout is not None
        for line in process.stdout:
            match = _READY.search(line)
            if match:
                found.append(match)
                return

    reader = threading.Thread(target=read_ready, daemon=True, name=f"{name}-ready")
    reader.start()
    reader.join(start_timeout)
    if not found:
        rc = None
        if not reader.is_alive():  # its stdout closed: the service exited, or is exiting
            try:
                rc = process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        process.kill()
        process.wait()
        tail = log_path.read_text()[-2000:]
        why = f"exited (rc={rc}) before it was ready" if rc is not None else \
            f"did not become ready within {start_timeout:.0f} s"
        raise Unavailable(f"service {name} {why}; log {log_path}:\n{tail}")
    match = found[0]
    log.info("started %s (pid %d) on port %s", name, process.pid, match.group(2))
    return ServiceProcess(name, process, int(match.group(2)), int(match.group(3)), log_path)
