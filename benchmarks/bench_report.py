"""`make bench-report`: docs/BENCHMARKS.md, docs/benchmarks/history.md and the README's results table, rewritten
from the committed raw data alone (measures nothing).

BENCHMARKS.md opens with the headline table (each bench's current result, what it is measured against, date,
machine, LLM, raw file), then one section per bench (``benchmarks.sections.CURRENT``); history.md holds the runs
a later one superseded (``HISTORY``). The README's results table, between its markers, is the headline table.
``documents()`` is what the unit test compares with the committed files.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from benchmarks.common import REPO_ROOT
from benchmarks.headlines import table
from benchmarks.sections import CURRENT, FROZEN, HISTORY, Figures, Section

log = logging.getLogger("benchmarks.report")
BENCHMARKS = Path("docs/BENCHMARKS.md")
HISTORY_FILE = Path("docs/benchmarks/history.md")
README = Path("README.md")
BEGIN = "<!-- bench-report: begin (make bench-report writes this table from the committed raw data) -->"
END = "<!-- bench-report: end -->"
INTRO = (
    "Every number in this file is rendered from raw results committed with the repository, by `make bench-report` "
    "(`benchmarks/sections.py` names each section's raw file and renderer, the bench's own report code; "
    "`tests/unit/benchmarks/test_sections.py` checks that the committed text is what they give). Runs a later run "
    f"superseded: `{HISTORY_FILE}`, rendered the same way. Numbers whose raw data is not in the repository, and "
    f"withdrawn records, are not results: `{FROZEN}` keeps them as frozen history.")
HISTORY_INTRO = (
    "Runs of a bench that a later run superseded, oldest first, each rendered from its committed raw file by "
    f"`make bench-report` (`benchmarks/sections.py`, `HISTORY`). The current result of every bench is in "
    f"`{BENCHMARKS}`.")


def headline_table() -> list[str]:
    rows = [s.headline() for s in CURRENT if s.headline is not None]
    return table([r for row in rows for r in (row if isinstance(row, list) else [row])])


def _join(parts: list[str]) -> str:
    return "\n\n".join(part.strip("\n") for part in parts) + "\n"


def benchmarks_md(figures: Figures) -> str:
    return _join(["# Benchmarks", INTRO, "## Headline", "\n".join(headline_table()),
                  *(s.render(figures) for s in CURRENT)])


def _with_raw(section: Section, figures: Figures) -> str:
    return section.render(figures).rstrip("\n") + "\n\nRaw data: " + ", ".join(f"`{p}`" for p in section.raw) + "."


def history_md(figures: Figures) -> str:
    linked = Figures(figures.draw, "../" + figures.prefix)
    return _join(["# Benchmarks: superseded runs", HISTORY_INTRO, *(_with_raw(s, linked) for s in HISTORY)])


def readme_block() -> str:
    """The README's results table with its markers."""
    return "\n".join([BEGIN, *headline_table(), END])


def readme_with_table(readme: str) -> str:
    """``readme`` with the text between its markers replaced by the table (a ValueError when a marker is
    missing)."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{README} has no {BEGIN!r} ... {END!r} markers")
    return readme[:start] + readme_block() + readme[end + len(END):]


def documents(draw: bool = False) -> dict[Path, str]:
    """Every generated document (path relative to the repository) and its text; the README with its table."""
    figures = Figures(draw)
    return {BENCHMARKS: benchmarks_md(figures), HISTORY_FILE: history_md(figures),
            README: readme_with_table((REPO_ROOT / README).read_text())}


def main(draw: Annotated[bool, typer.Option(help="Redraw the figures from the raw data too.")] = True) -> None:
    """Rewrites the benchmark documents and the README's results table from the committed raw data."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for path, text in documents(draw).items():
        target = REPO_ROOT / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        log.info("wrote %s (%d lines)", path, text.count("\n"))


if __name__ == "__main__":
    typer.run(main)
