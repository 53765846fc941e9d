"""bench-replay's section is rebuilt from its raw results alone: each number is what it says, a record whose
prompts drifted is listed as drifted with what changed, the withdrawn ablation's records apart from the results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.bench_replay import report
from benchmarks.common import REPO_ROOT, load_results
from benchmarks.replay.report import RAW, TITLE, headline_result, render_section, summary_sentences, verdict


def recorded(task: str, success: float, frames: int, best: dict[str, float]) -> dict[str, Any]:
    return {"task": task, "success_rate": success, "frames_used": frames, "subtask_best": best, "budgets": {
        "max_outer_iterations": 2}, "plan": ["a (code)"], "llm_calls": 5, "llm_calls_by_agent": {"fast": 2, "slow": 1,
        "critic": 2}, "wall_seconds": 149.4, "model": "a capable model"}


def replayed(success: float | None, frames: int, same: int = 5, replayed_calls: int = 5, error: str = "",
             **extra: Any) -> dict[str, Any]:
    return {"success_rate": success, "frames_used": frames, "recorded_calls": 5, "replayed_calls": replayed_calls,
            "same_prompt": same, "not_made": {}, "answered_elsewhere": [], "changes": [], "changes_left_out": 0,
            "error": error, "wall_seconds": 20.4, "date": "2026-11-29 10:00 UTC",
            "machine": "a 2-core machine, load average 1.5 at start"} | extra


LIMITS = {"removed": "…one JSON object only.", "added": "…one JSON object only; its limits: code 10 to 8,000…",
          "agents": ["fast"], "calls": 2}
OTHER = {"removed": "Keep it short.", "added": "Keep it shorter.", "agents": ["slow"], "calls": 1}
FIXTURE = {"raw": "docs/results/bench-replay.json", "runs": [
    {"name": "claude-relay-ablation-stone-one", "recorded": recorded("collect_stone", 1.0, 103, {"a": 1.0}),
     "replay": replayed(1.0, 103, same=0, replayed_calls=1, changes=[LIMITS])},
    {"name": "relay-stone", "recorded": recorded("collect_stone", 1.0, 103, {"a": 1.0}), "replay": replayed(1.0, 103)},
    {"name": "relay-pickaxe", "recorded": recorded("make_wood_pickaxe", 1.0, 54, {"a": 1.0}),
     "replay": replayed(1.0, 54, same=0, replayed_calls=3, not_made={"critic": 2}, changes=[LIMITS, OTHER],
                        answered_elsewhere=[{"call": "iter0-b-critic", "answered_with": "00003-iter0-a-critic.json"}])},
    {"name": "relay-diamond", "recorded": recorded("collect_diamond", 0.0, 2927, {f"s{i}": 1.0 for i in range(9)}
                                                   | {"collect_diamond": 0.75}), "replay": None}]}


def test_the_section_is_rebuilt_from_the_raw_results_with_each_number_as_measured(tmp_path: Path) -> None:
    raw, output = tmp_path / "bench-replay.json", tmp_path / "BENCHMARKS.md"
    raw.write_text(json.dumps(FIXTURE))
    output.write_text("# Benchmarks\n\n" + TITLE + "\n\nold text\n\n## Next section\n\nkept\n")
    report(output=output, raw=raw)
    text = output.read_text()
    assert "old text" not in text and text.endswith("## Next section\n\nkept\n")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:4] == [
        "| collect_stone | `docs/runs/relay-stone` | O=2 | a (code) | 100% | 103 | 149 | 100% | 103 | 20 | "
        "reproduced |",
        "| make_wood_pickaxe | `docs/runs/relay-pickaxe` | O=2 | a (code) | 100% | 54 | 149 | 100% | 54 | 20 | "
        "drifted |",
        "| collect_diamond | `docs/runs/relay-diamond` | O=2 | a (code) | 0% | 2927 | 149 | - | - | - | "
        "not replayed |"]
    assert rows[5:8] == [
        "| `relay-stone` | 100% | 5 (critic 2, fast 2, slow 1) | 5 | 5 | 0 | 0 | - |",
        "| `relay-pickaxe` | 100% | 5 (critic 2, fast 2, slow 1) | 3 | 0 | critic 2 | 1 | A (2), 1 other changed line, "
        "e.g. 'Keep it short.' -> 'Keep it shorter.' |",
        "| `relay-diamond` | 0% | 5 (critic 2, fast 2, slow 1) | - | - | - | - | - |"]
    withdrawn = text.split("Withdrawn records")[1]
    assert "| `claude-relay-ablation-stone-one` | 100% | 5 (critic 2, fast 2, slow 1) | 1 | 0 | 0 | 0 | A (2) |" \
        in withdrawn and "relay-stone`" not in withdrawn
    assert "A: the answer format states the schema's limits" in text
    assert "on a 2-core machine (load average 1.5 to 1.5 at the replays' starts), 2026-11-29 10:00 UTC" in text


def test_the_headline_counts_the_kept_runs_and_the_withdrawn_records_apart() -> None:
    assert headline_result(FIXTURE) == (
        "3 kept runs (collect_stone, make_wood_pickaxe and collect_diamond): 1 reproduced, 1 drifted and 1 not "
        "replayed; 5 of 10 recorded calls replayed with the recorded prompt (prompts edited since the records, each "
        "edit listed in the section); 1 record of the withdrawn ablation: 0 of 5 calls with the recorded prompt")


def test_the_sub_task_share_and_the_threshold_are_each_what_they_say() -> None:
    text = " ".join(summary_sentences(FIXTURE["runs"][1:]))
    assert "2 of 3 recorded runs solved their task (collect_stone, make_wood_pickaxe)." in text
    assert ("collect_diamond (`relay-diamond`) ended at 0% over the final episodes; 9 of 10 sub-tasks (90%) reached a "
            "test success of at least 80%, not collect_diamond (best 75%).") in text
    assert ("Replayed with no model: 2 of 3 records; 1 reproduced the recorded final success and frame count with "
            "every recorded prompt word for word, 1 drifted") in text
    assert "Not replayed since the prompt check: `relay-diamond`." in text


def test_a_replay_with_the_recorded_prompts_but_another_result_is_not_reproduced() -> None:
    runs = [{"name": "r", "recorded": recorded("collect_stone", 1.0, 103, {"a": 1.0}), "replay": replayed(0.5, 140)}]
    text = " ".join(summary_sentences(runs))
    assert "0 reproduced" in text and "0 drifted" in text
    assert "1 replayed the recorded prompts to another result" in text


def test_a_replay_that_stopped_is_a_drift_with_the_error() -> None:
    runs = [{"name": "r", "recorded": recorded("collect_stone", 1.0, 103, {"a": 1.0}),
             "replay": replayed(None, 0, same=3, replayed_calls=3, error="Unavailable: the run stopped",
                                not_made={"critic": 2})}]
    section = render_section({"runs": runs})
    assert "| drifted |" in section and "| critic 2 | 0 | -; stopped: Unavailable: the run stopped |" in section


def test_the_committed_section_is_the_one_the_committed_raw_results_give() -> None:
    section = render_section(load_results(REPO_ROOT / RAW))
    assert section in (REPO_ROOT / "docs" / "BENCHMARKS.md").read_text()


def game_record(score: float | None) -> dict[str, Any]:
    return recorded("crafter", 0.0, 950866, {"a": 1.0}) | {"success_rate": None, "score": score}


def test_a_whole_game_record_is_compared_by_its_score_and_never_shown_as_a_held_out_number() -> None:
    same = {"name": "relay-crafter", "recorded": game_record(40.88037279594115),
            "replay": replayed(None, 950866, score=40.88037279594115)}
    other = same | {"replay": replayed(None, 950866, score=35.2)}  # the same (no) success: another result still
    assert [verdict(same), verdict(other)] == ["reproduced", "different"]
    section = render_section({"runs": [other]})
    assert ("| score 40.9 (the run's own final evaluation, not held-out) | 950866 | 149 | score 35.2 (the run's own "
            "final evaluation, not held-out) | 950866 | 20 | different |") in section
    assert ("crafter (`relay-crafter`), a whole-game run (no success condition), scored 40.9 in the run's own final "
            "evaluation, not held-out (its held-out score is bench-game's, in the Crafter section)") in section
    rows = [line for line in section.splitlines() if "relay-crafter`" in line and line.startswith("| ")]
    assert len(rows) == 2 and not any("%" in row for row in rows)  # no success rate, 0% or other
