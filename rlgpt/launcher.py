"""Starts rlgpt services as local processes on loopback and stops them cleanly."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rlgpt.errors import Unavailable

log = logging.getLogger(__name__)
_READY = re.compile(r"RLGPT_READY service=(\w+) port=(\d+) metrics_port=(-?\d+)")


@dataclass
class ServiceProcess:
    """A running ``rlgpt serve <name>`` process and the ports it bound."""

    name: str
    process: subprocess.Popen
    port: int
    metrics_port: int
    log_path: Path

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, grace_seconds: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0f s; killing it", self.name, grace_seconds)
                self.process.kill()
                self.process.wait()


def start_service(name: str, log_dir: Path, *, extra_args: tuple[str, ...] = (), metrics_port: int = 0,
                  start_timeout: float = 120.0) -> ServiceProcess:
    """Runs ``rlgpt serve NAME --port 0`` and waits for its ready line; its stderr goes to ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    stderr = log_path.open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "rlgpt.cli", "serve", name, "--port", "0", "--metrics-port", str(metrics_port),
         *extra_args],
        stdout=subprocess.PIPE, stderr=stderr, text=True, env=dict(os.environ), start_new_session=True)
    stderr.close()
    found: list[re.Match[str]] = []

    def read_ready() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            match = _READY.search(line)
            if match:
                found.append(match)
                return

    reader = threading.Thread(target=read_ready, daemon=True)
    reader.start()
    reader.join(start_timeout)
    if not found:
        process.kill()
        process.wait()
        tail = log_path.read_text()[-2000:]
        raise Unavailable(f"service {name} did not become ready within {start_timeout:.0f} s; log {log_path}:\n{tail}")
    match = found[0]
    log.info("started %s (pid %d) on port %s", name, process.pid, match.group(2))
    return ServiceProcess(name, process, int(match.group(2)), int(match.group(3)), log_path)


@contextlib.contextmanager
def running_services(names: list[str], log_dir: Path) -> Iterator[dict[str, ServiceProcess]]:
    """Starts the named services and always stops them, in reverse order, on exit (Ctrl-C included)."""
    started: dict[str, ServiceProcess] = {}
    try:
        for name in names:
            started[name] = start_service(name, log_dir)
        yield started
    finally:
        for service in reversed(list(started.values())):
            service.stop()
