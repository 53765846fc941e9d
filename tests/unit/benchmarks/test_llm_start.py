"""bench-llm tests a skill where the planner would: from what the rules' chain before its sub-task leaves."""

from __future__ import annotations

from benchmarks.llm.report import render


def test_the_section_says_where_tests_start() -> None:
    results = {"episodes": 2, "steps": 200, "subtasks": ["collect_wood"], "models": []}
    assert "starting with the items the sub-task needs" in render(results)
    assert "as the planner tests a sub-task of a plan" in render({**results, "start_inventory": "chain"})
