"""LLM calls a stop does not wait for.

An answer may take minutes (an embedded server under load, a relay answered by hand), and a run's stop (Ctrl-C,
StopRun) should not wait for it. A thread that runs within :func:`cancelled_by` makes its LLM requests in a helper
thread and gives up on them, raising the caller's error, as soon as the event is set; the abandoned request ends
on its own (its answer, if any, is dropped: the call was never answered, so a resumed run asks it again).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

R = TypeVar("R")
_local = threading.local()
POLL_SECONDS = 0.2
"""How often a waiting call looks at the event."""


@contextlib.contextmanager
def cancelled_by(event: threading.Event, error: Callable[[], Exception]) -> Iterator[None]:
    """LLM calls this thread makes within the block give up when ``event`` is set, raising ``error()``."""
    before = getattr(_local, "stop", None)
    _local.stop = (event, error)
    try:
        yield
    finally:
        _local.stop = before


def check() -> None:
    """Raises the caller's error if this thread's event is set (nothing outside :func:`cancelled_by`)."""
    stop = getattr(_local, "stop", None)
    if stop is not None and stop[0].is_set():
        raise stop[1]()


def sleep(seconds: float) -> None:
    """A retry's wait, cut short by this thread's event."""
    stop = getattr(_local, "stop", None)
    if stop is None:
        threading.Event().wait(seconds)
        return
    if stop[0].wait(seconds):
        raise stop[1]()


def call(request: Callable[[], R]) -> R:
    """``request()``; within :func:`cancelled_by`, run in a helper thread and given up when the event is set."""
    stop = getattr(_local, "stop", None)
    if stop is None:
        return request()
    event, error = stop
    check()
    done = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = request()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, daemon=True, name="llm-request").start()
    while not done.wait(POLL_SECONDS):
        if event.is_set():
            raise error()
    if "error" in box:
        raise box["error"]
    return box["value"]
