"""Facts about the machine this process runs on, read in one place."""

from __future__ import annotations

import os


def cpu_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one, else every core)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
