"""Reporting every `make bench-*` script shares: the machine, section-wise BENCHMARKS.md updates, number
formats, markdown tables, plots and the raw JSON results a report is rebuilt from."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import platform
import time
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psutil

HEADER = "# Benchmarks\n\nMeasured performance of the rlgpt services; each section is written by its benchmark.\n"
REPO_ROOT = Path(__file__).resolve().parent.parent
RAW_DIR = Path("docs/bench-raw")  # per bench: results.json tracked (sections are rendered from it), logs ignored
MIB = 1024 * 1024


# --- the machine ------------------------------------------------------------------------------------
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


def package_version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def machine_info(packages: Iterable[str] = ()) -> dict[str, Any]:
    """The machine as data (for the raw JSON): CPU, cores, RAM, Python, load, and the named packages' versions
    (keys with '-' turned into '_')."""
    return {
        "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "cpu_affinity": len(os.sched_getaffinity(0)),
        "ram_gib": round(psutil.virtual_memory().total / 1024**3, 1), "python": platform.python_version(),
        "platform": platform.platform(), "load_average": list(os.getloadavg()),
        **{name.replace("-", "_"): package_version(name) for name in packages},
    }


def machine_line(date_utc: str, machine: dict[str, Any], packages: Iterable[str]) -> str:
    """"Measured <date> on <CPU>, <n> cores, <RAM>, Python <v>, <package> <v>, ..." from ``machine_info``'s dict."""
    versions = "".join(f", {name} {machine[name.replace('-', '_')]}" for name in packages)
    return (f"Measured {date_utc} on {machine['cpu_model']}, {machine['cpu_count']} cores, {machine['ram_gib']} GiB "
            f"RAM, Python {machine['python']}{versions}")


def setup_logging(console: Any, level: str) -> None:
    """Rich log lines on ``console`` (a rich Console on stderr) at ``level``."""
    from rich.logging import RichHandler

    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), format="%(message)s",
                        handlers=[RichHandler(console=console, show_path=False)])


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


# --- results ----------------------------------------------------------------------------------------
def raw_path(bench: str, name: str = "results.json") -> Path:
    """Where a benchmark keeps its raw results: docs/bench-raw/<bench>/<name>."""
    return RAW_DIR / bench / name


def save_results(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")


def load_results(path: Path) -> dict[str, Any]:
    """The raw results a run saved; what a report is rebuilt from without measuring again."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no saved results; run the benchmark first (without --report-only)")
    return json.loads(path.read_text())


def measured_or_saved(path: Path, report_only: bool, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """With ``report_only`` the results saved at ``path``; otherwise ``measure()``'s, timed and saved there."""
    if report_only:
        return load_results(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results = measure()
    results["total_seconds"] = time.perf_counter() - started
    save_results(path, results)
    return results


# --- BENCHMARKS.md ----------------------------------------------------------------------------------
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


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> list[str]:
    """Lines of a markdown table; ``align`` has one letter per column, 'l' or 'r' (default: first left, rest
    right)."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)]


def fmt_rate(value: float | None) -> str:
    return f"{value:,.0f}" if value else "-"


def fmt_pct(value: float | None) -> str:
    """A ratio or share as a percentage, '-' when unknown."""
    return f"{value:.0%}" if value is not None else "-"


def fmt_mib(value: float | None) -> str:
    return f"{value:,.0f} MiB" if value else "-"


def joined(parts: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1] if parts else ""


def save_plot(fig: Any, path: Path, dpi: int = 100) -> Path:
    """Saves a matplotlib figure (tight layout) and closes it."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
