"""Starts rlgpt services as local processes on loopback and stops them cleanly.

A started service dies with its starter (:func:`rlgpt.processes.die_with_parent`), so a starter killed with
SIGKILL, or one that crashes before its ``finally``, leaves no service behind. The kernel counts the *thread* that
started it as the parent: start services from a thread that outlives them (the main thread, as the runner, the
benchmarks and tests do).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rlgpt.errors import Unavailable
from rlgpt.processes import die_with_parent

log = logging.getLogger(__name__)
_READY = re.compile(r"RLGPT_READY service=(\w+) port=(\d+) metrics_port=(-?\d+)")


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
                  env: Mapping[str, str] | None = None, start_timeout: float = 120.0,
                  log_name: str = "", cwd: Path | None = None) -> ServiceProcess:
    """Runs ``rlgpt serve NAME --port 0`` and waits for its ready line; its stderr goes to ``log_dir/NAME.log``
    (``log_dir/LOG_NAME.log`` when several processes serve NAME).

    ``env`` adds to (or overrides) this process's environment; ``cwd``: where it runs (its imports come first from
    there). The service runs in its own session, so a
    Ctrl-C at the terminal reaches only its starter, which stops it; it gets SIGTERM if the starter dies.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{log_name or name}.log"
    stderr = log_path.open("w")
    process = subprocess.Popen(
        die_with_parent([sys.executable, "-m", "rlgpt.app.cli", "serve", name, "--port", "0", "--metrics-port",
                         str(metrics_port), *extra_args]),
        stdout=subprocess.PIPE, stderr=stderr, text=True, env={**os.environ, **(env or {})},
        start_new_session=True, cwd=cwd)
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
