"""Helpers every `make bench-*` script shares: the machine line and section-wise BENCHMARKS.md updates."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import psutil

HEADER = "# Benchmarks\n\nMeasured performance of the rlgpt services; each section is written by its benchmark.\n"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_description() -> str:
    """One line: CPU, cores, RAM, Python, load average."""
    load = os.getloadavg()[0]
    return (f"{cpu_model()}, {len(os.sched_getaffinity(0))} cores, "
            f"{psutil.virtual_memory().total / 1024**3:.1f} GiB RAM, Python {platform.python_version()}, "
            f"load average {load:.2f} at start")


def write_section(output: Path, title: str, section: str) -> None:
    """Replaces the section that starts with ``title`` (up to the next ``## ``), or appends it."""
    text = output.read_text() if output.exists() else HEADER
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == title.strip()), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        tail = "\n".join(lines[end:])
        new = "\n".join(lines[:start]) + "\n" + section.rstrip("\n") + "\n" + ("\n" + tail + "\n" if tail else "")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(new)
