"""Every benchmark document is what the committed raw data gives: docs/BENCHMARKS.md, docs/benchmarks/history.md and
the README's results table rendered by the registry (benchmarks/sections.py) from the raw files alone, compared
with the committed files; every committed raw file has its section; the frozen history is marked as such."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.bench_report import BEGIN, BENCHMARKS, END, HISTORY_FILE, README, documents, readme_with_table
from benchmarks.common import REPO_ROOT
from benchmarks.sections import CURRENT, FROZEN, HISTORY
from benchmarks.skills.report import render_section as skills_section

MAX_LINES = 450  # 440 until run 7's record and its validation arms (2026-11-30); one section per bench


@pytest.fixture(scope="module")
def rendered() -> dict[Path, str]:
    return documents(draw=False)


@pytest.mark.parametrize("path", [BENCHMARKS, HISTORY_FILE, README], ids=str)
def test_the_committed_document_is_the_one_the_committed_raw_data_gives(rendered: dict[Path, str],
                                                                        path: Path) -> None:
    committed = (REPO_ROOT / path).read_text()
    if committed != rendered[path]:
        diff = next(i for i, (a, b) in enumerate(zip(committed.splitlines(), rendered[path].splitlines(),
                                                     strict=False)) if a != b) if committed else 0
        pytest.fail(f"{path} is not what `make bench-report` writes from the committed raw data (first difference "
                    f"at line {diff + 1}); run `make bench-report` and commit the raw data with it")


def test_benchmarks_md_opens_with_the_headline_table_and_stays_short(rendered: dict[Path, str]) -> None:
    text = rendered[BENCHMARKS]
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Headline"
    assert text.split("## Headline", 1)[1].lstrip().startswith("| benchmark | current result |")
    assert text.count("\n") <= MAX_LINES


def test_every_section_title_is_unique_and_each_current_bench_has_a_headline_row(rendered: dict[Path, str]) -> None:
    for path in (BENCHMARKS, HISTORY_FILE):
        titles = [line for line in rendered[path].splitlines() if line.startswith("## ")]
        assert len(titles) == len(set(titles)), path
    table = rendered[BENCHMARKS].split("## Headline", 1)[1].split("\n## ", 1)[0]
    rows = [s.headline() for s in CURRENT if s.headline is not None]
    expected = sum(len(r) if isinstance(r, list) else 1 for r in rows)  # Crafter: bench-crafter, bench-game
    assert len(rows) == len(CURRENT) and expected >= len(CURRENT)
    assert len([line for line in table.splitlines() if line.startswith("| `make ")]) == expected
    assert "| `make bench-crafter` |" in table and "| `make bench-game` |" in table  # both where both raw files are


def test_every_committed_raw_file_has_a_section() -> None:
    named = {path for section in (*CURRENT, *HISTORY) for path in section.raw}
    found = {path.relative_to(REPO_ROOT) for pattern in ("docs/bench-raw/*/*.json", "docs/results/*.json")
             for path in REPO_ROOT.glob(pattern)
             if not path.name.endswith((".partial.json", "quick.json"))}
    assert found - named == set(), "raw results no section is rendered from: register them in benchmarks/sections.py"


def test_the_readme_table_lies_between_its_markers_only() -> None:
    readme = (REPO_ROOT / README).read_text()
    assert readme.count(BEGIN) == 1 and readme.count(END) == 1
    with pytest.raises(ValueError, match="markers"):
        readme_with_table("no table here")


def test_every_frozen_section_says_under_its_title_why_it_is_no_result() -> None:
    lines = (REPO_ROOT / FROZEN).read_text().splitlines()
    titles = [i for i, line in enumerate(lines) if line.startswith("## ")]
    assert titles
    for i in titles:
        marker = next(line for line in lines[i + 1:] if line.strip())
        assert re.match(r"\*\*(Frozen, no raw data|Withdrawn on \d{4}-\d\d-\d\d): not a result\.\*\*", marker), \
            lines[i]


def test_the_capable_model_ablation_is_withdrawn_with_its_protocol(rendered: dict[Path, str]) -> None:
    text = rendered[BENCHMARKS]
    section = text.split("## Agent ablation with a capable model through the relay", 1)[1].split("\n## ", 1)[0]
    assert "Withdrawn on 2026-11-28" in section and "fresh model instance" in section
    assert "empty skill library" in section and "| " not in section  # no numbers table left as a result


def test_the_skills_section_comes_from_the_result_files_and_says_when_they_are_stale(tmp_path: Path) -> None:
    for attempt, rate in ((1, 0.4), (2, 1.0)):
        (tmp_path / f"collect_wood.a{attempt}.result.json").write_text(json.dumps(
            {"subtask": "collect_wood", "attempt": attempt, "success_rate": rate, "start_inventory": {}}))
    meta = {"model": "M", "date_utc": "2026-01-01 00:00 UTC", "machine": "CPU, 2 cores"}
    (tmp_path / "report.json").write_text(json.dumps(meta))
    section = skills_section(tmp_path, shown=Path("answers"))
    assert "| collect_wood | nothing | 40% | 100% | 40% / 100% |" in section
    assert "| place_table | - | not run | - | - |" in section
    assert "1 of 1 sub-tasks had a skill that succeeded in at least one episode on the first attempt" in section
    assert "`answers`" in section and "Stale" not in section
    (tmp_path / "report.json").write_text(json.dumps(meta | {"stale": "the prompt changed."}))
    assert skills_section(tmp_path).endswith("**Stale:** the prompt changed.\n")
