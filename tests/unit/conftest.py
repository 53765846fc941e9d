"""The fast tier's rule, enforced: a test under tests/unit starts no process and serves nothing.

While a unit test sets up and runs, starting a process (subprocess, fork, multiprocessing) or binding a socket (a
gRPC or HTTP server) fails the test with :class:`FastTierViolation`; such a test belongs in tests/integration.
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import grpc
import numpy.testing  # noqa: F401  (imported here, outside the guard: its first import runs lscpu)
import pytest


class FastTierViolation(RuntimeError):
    """A unit test tried to start a process or a server."""


def _refuse(what: str) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise FastTierViolation(f"a unit test may not {what}: move the test to tests/integration")
    return refuse


@contextlib.contextmanager
def _fast_tier_only() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", _refuse("start a process (subprocess)"))
        patch.setattr(os, "fork", _refuse("fork"))
        patch.setattr(os, "posix_spawn", _refuse("start a process (posix_spawn)"))
        patch.setattr(multiprocessing.process.BaseProcess, "start", _refuse("start a process (multiprocessing)"))
        patch.setattr(socket.socket, "bind", _refuse("bind a socket (start a server)"))
        patch.setattr(grpc, "server", _refuse("start a gRPC server"))
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _fast_tier_only():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _fast_tier_only():
        return (yield)
