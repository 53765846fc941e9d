"""A kept record keeps its run's own id and, for a whole-game run, the score of its final evaluation: a kept folder
is named by hand, and the skills the run registered are named by its id; a whole-game task has no success
condition, so its record says no success rate rather than 0%."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bench_replay
from benchmarks.replay.records import recorded_entry, run_id_of, run_summary

RUN_ID = "crafter__20261129-002505__603b98"


def make_run(tmp_path: Path, objective: str = "game", final: dict | None = None) -> Path:
    """A finished run directory named by its id, with its events, as the planner leaves it."""
    run = tmp_path / "runs" / RUN_ID
    (run / "llm").mkdir(parents=True)
    (run / "request.json").write_text(json.dumps({"task": {"name": "crafter", "objective": objective}}))
    final = final if final is not None else {"success_rate": 0.0, "score": 9.683644103626568, "episodes": 32}
    (run / "state.json").write_text(json.dumps({"final": final, "frames_used": 947586, "finished": True}))
    (run / "events.jsonl").write_text("\n".join(json.dumps({"runId": RUN_ID, "seq": str(i), "time": 100.0 + i})
                                                for i in (1, 2)) + "\n")
    return run


def test_a_whole_game_run_is_measured_by_its_score_not_a_success_rate(tmp_path: Path) -> None:
    summary = run_summary(make_run(tmp_path))
    assert summary["score"] == 9.683644103626568 and summary["success_rate"] is None


def test_a_run_with_a_success_condition_keeps_its_success_rate_and_no_score(tmp_path: Path) -> None:
    summary = run_summary(make_run(tmp_path, objective="", final={"success_rate": 0.75, "episodes": 8}))
    assert summary["success_rate"] == 0.75 and summary["score"] is None


def test_keep_records_the_runs_own_id_and_score_and_the_kept_folder_gives_them_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path)
    monkeypatch.setattr(bench_replay, "RUNS", tmp_path / "docs-runs")
    bench_replay.keep(run, name="embedded-gemma-crafter", model="a model")
    kept = tmp_path / "docs-runs" / "embedded-gemma-crafter"
    recorded = json.loads((kept / "recorded.json").read_text())
    assert recorded["run_id"] == RUN_ID and recorded["score"] == 9.683644103626568
    assert recorded["success_rate"] is None
    assert run_id_of(kept) == RUN_ID  # not the folder's name, which names no skill of the run
    assert recorded_entry(kept)["score"] == 9.683644103626568


@pytest.mark.parametrize(("files", "expected"), [
    ({"status.json": {"runId": "from-status"}, "recorded.json": {"run_id": "from-record"}}, "from-status"),
    ({"recorded.json": {"run_id": "from-record"}}, "from-record"),
    ({"recorded.json": {"model": "an older record"}}, "folder"),
    ({}, "folder"),
])
def test_the_run_id_comes_from_the_run_then_the_record_then_the_folder(tmp_path: Path, files: dict,
                                                                       expected: str) -> None:
    run = tmp_path / "folder"
    run.mkdir()
    for name, content in files.items():
        (run / name).write_text(json.dumps(content))
    assert run_id_of(run) == expected


def test_the_run_id_of_a_run_without_status_is_its_events(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    assert run_id_of(run.rename(tmp_path / "renamed")) == RUN_ID


def test_sub_task_results_are_the_plans_sub_tasks_not_the_final_controllers_candidates(tmp_path: Path) -> None:
    """A final controller's candidate (RL around the kept plan, the game's macro-action policy) keeps its trainings
    under a name of its own in the state: it is no sub-task of any plan, so it is not counted as one."""
    run = make_run(tmp_path)
    state = json.loads((run / "state.json").read_text())
    tested = {"tests": [{"success_rate": 0.5}]}
    state["subtasks"] = {"wood": tested, "table": {"tests": []}, "crafter__kept_plan": tested}
    state["plans"] = [{"subtasks": [{"name": "wood"}]}]
    state["plan"] = {"subtasks": [{"name": "wood"}, {"name": "table"}]}
    (run / "state.json").write_text(json.dumps(state))
    assert run_summary(run)["subtask_best"] == {"wood": 0.5, "table": 0.0}
