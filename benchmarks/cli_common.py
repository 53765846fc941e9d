"""What the benchmarks' command lines share: the options each one has, the live progress bar, a checked ``--tag``,
and a section with its figure rebuilt from the raw results a run saved."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks.common import load_results, write_section

log = logging.getLogger("benchmarks")
ReportOnly = Annotated[bool, typer.Option(help="Rebuild the section from the saved results.")]
"""``--report-only``: measure nothing, rebuild the section from the raw results."""
LogLevel = Annotated[str, typer.Option(help="Logging level.")]
"""``--log-level``: of the rich log lines on the console."""


def progress_bar(console: Console, unit: str) -> Progress:
    """Live progress of a benchmark's tasks on ``console``, counted in ``unit`` (frames, rules)."""
    return Progress(TextColumn("{task.description}"), BarColumn(),
                    TextColumn(f"{{task.completed:,.0f}}/{{task.total:,.0f}} {unit}"), TimeElapsedColumn(),
                    console=console)


def checked_tag(tag: str) -> str:
    """``--tag`` as given (the name of a run of its own, part of its files' names); a usage error when it cannot
    name files."""
    if tag and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,31}", tag):
        raise typer.BadParameter(f"{tag[:40]!r}: use 1 to 32 lowercase letters, digits and '-'", param_hint="--tag")
    return tag


def rebuild_section(output: Path, raw_json: Path, figure: Path, plot: Callable[[dict[str, Any], Path], Path],
                    title: Callable[[dict[str, Any]], str],
                    render: Callable[[dict[str, Any], str, str], str]) -> None:
    """Rebuilds a section of ``output`` and its figure from the raw results at ``raw_json`` (a usage error when
    there are none): ``plot`` draws the figure at ``figure``, ``title`` names the section, ``render`` writes it
    around the figure's path relative to ``output``."""
    if not raw_json.exists():
        raise typer.BadParameter(f"no results at {raw_json}; run without --report-only first")
    results = load_results(raw_json)
    drawn = plot(results, figure)
    name = title(results)
    write_section(output, name, render(results, str(drawn.relative_to(output.parent)), name))
    log.info("wrote %s and %s from %s", output, drawn, raw_json)
