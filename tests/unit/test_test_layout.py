"""The test tree's own rules: pytest imports test modules by basename (no packages), so two test files of one name
in different folders break collection of the whole suite; and every test lives in a tier folder."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_its_own_basename() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [name for name, n in names.items() if n > 1] == []


def test_every_test_module_lives_in_a_tier() -> None:
    tiers = {"unit", "integration", "deploy"}
    assert [str(p) for p in TESTS.rglob("test_*.py") if p.relative_to(TESTS).parts[0] not in tiers] == []
