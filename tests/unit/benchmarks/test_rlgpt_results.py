"""bench-rlgpt's results carry each run's own date, machine and LLM: a rerun of one (task, mode, agent setup)
replaces that run and keeps the others with theirs, and the section and headline show each run's date."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import headlines
from benchmarks.rlgpt.report import render_section
from benchmarks.rlgpt.results import measured, merged

SETTINGS = {"frames": 20000, "eval_episodes": 32, "outer": 2, "inner": 2, "agents": ["slow-fast-critic"]}
OLD_MACHINE = "Test CPU, 2 cores, 8.0 GiB RAM, Python 3.11.7, load average 0.53 at start"
NEW_MACHINE = "Test CPU, 2 cores, 8.0 GiB RAM, Python 3.11.7, load average 1.73 at start"


def run(task: str, mode: str, success: float, agents: str = "", **more: Any) -> dict[str, Any]:
    return {"task": task, "mode": mode, "agents": agents, "success_rate": success, "seconds": 600.0,
            "frames_to_first_training_success": None, "training_frames": 0, "tokens": 0, "plan": "", "error": "",
            **more}


def saved_before() -> dict[str, Any]:
    """Results saved before runs carried their own date: one for the whole bench."""
    return {"date_utc": "2026-11-28 16:18 UTC", "machine": OLD_MACHINE, "llm": "embedded test model",
            "skill_format": "auto", "settings": SETTINGS, "reference_skills": [], "total_seconds": 1900.0,
            "runs": [run("collect_stone", "pure-rl", 0.0),
                     run("collect_stone", "pure-code", 0.9375, "slow-fast-critic"),
                     run("collect_stone", "rl-gpt", 0.0, "slow-fast-critic")]}


def rerun() -> dict[str, Any]:
    return {"settings": SETTINGS, "reference_skills": [], "total_seconds": 1300.0,
            "runs": [run("collect_stone", "rl-gpt", 0.5, "slow-fast-critic", date_utc="2026-11-29 00:19 UTC",
                         machine=NEW_MACHINE, llm="embedded test model", skill_format="auto")]}


def test_a_rerun_replaces_its_run_in_place_and_the_others_keep_their_date() -> None:
    results = merged(saved_before(), rerun())
    assert [(r["mode"], r["success_rate"], r["date_utc"]) for r in results["runs"]] == [
        ("pure-rl", 0.0, "2026-11-28 16:18 UTC"), ("pure-code", 0.9375, "2026-11-28 16:18 UTC"),
        ("rl-gpt", 0.5, "2026-11-29 00:19 UTC")]
    assert all(r["machine"] and r["llm"] == "embedded test model" and r["skill_format"] == "auto"
               for r in results["runs"])
    assert "date_utc" not in results and "machine" not in results and results["total_seconds"] == 1800.0
    section = render_section(results)
    assert "| rl-gpt | slow-fast-critic | 50% |" in section and "| 2026-11-29 00:19, load 1.73 |" in section
    assert "| pure-rl | - | 0% |" in section and "| 2026-11-28 16:18, load 0.53 |" in section
    assert "on Test CPU, 2 cores, 8.0 GiB RAM, Python 3.11.7; LLM: embedded test model;" in section
    headline = headlines.rlgpt(results, Path("docs/results/bench-rlgpt.json"))
    assert headline.date == "2026-11-28 16:18 UTC to 2026-11-29 00:19 UTC" and headline.machine == "Test CPU, 2 cores"
    again = merged(results, rerun())  # a second rerun replaces the first, nothing is added
    assert len(again["runs"]) == 3 and again["runs"][2]["success_rate"] == 0.5


def test_a_new_run_is_added_and_results_at_other_settings_are_replaced() -> None:
    new = rerun()
    new["runs"][0] |= {"task": "make_wood_pickaxe"}
    added = merged(saved_before(), new)
    assert [(r["task"], r["mode"]) for r in added["runs"]][-1] == ("make_wood_pickaxe", "rl-gpt")
    other = rerun() | {"settings": {**SETTINGS, "frames": 30000}}
    assert merged(saved_before(), other) == other  # not comparable at equal frames: the new results alone
    assert merged(None, other) == other


def test_results_saved_before_runs_had_their_own_date_still_render() -> None:
    old = saved_before()
    assert measured(old, old["runs"][0])["date_utc"] == "2026-11-28 16:18 UTC"
    section = render_section(old)
    assert section.count("| 2026-11-28 16:18, load 0.53 |") == 3
    assert "skills written as RLGPT_SKILL_FORMAT=auto" in section
