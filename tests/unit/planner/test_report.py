"""The planner's run report: markdown and plots from a run's state; every training of a sub-task on its curve;
the report's files as ReportChunk messages."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from rlgpt.errors import FailedPrecondition
from rlgpt.v1 import planner_pb2
from services.planner.program_code import PROGRAM_HEADER
from services.planner.report import outcome, report_chunks, write_run_report
from services.planner.report_plots import plot_iterations, plot_subtask_curves
from services.planner.state import RunState, SubTaskState


def _curve(job: str, iteration: int, start: int, rates: list[float]) -> list[dict]:
    return [{"env_frames": start + 1000 * i, "success_rate": r, "mean_return": 0.0, "job_id": job,
             "iteration": iteration} for i, r in enumerate(rates)]


def _state() -> RunState:
    table = SubTaskState(name="table", decision="rl", status="done", success_rate=0.5, frames=8000,
                         curve=_curve("a", 0, 0, [0, 0, 0.1]) + _curve("b", 1, 4000, [0.1, 0.3, 0.5]),
                         tests=[{"frames": 3000, "success_rate": 0.0}, {"frames": 8000, "success_rate": 0.5}])
    return RunState(frames_used=8000, finished=True, subtasks={"table": table},
                    final={"success_rate": 0.25, "episodes": 4, "controller": "policy of table"},
                    iterations=[{"iteration": 0, "tokens": 900, "seconds": 60.0, "frames": 4000},
                                {"iteration": 1, "tokens": 700, "seconds": 50.0, "frames": 4000, "success_rate": 0.0,
                                 "controller": "chain: wood (code) -> table (policy j2)"}],
                    plans=[{"subtasks": [{"name": "table", "decision": "DECISION_RL"}], "rationale": "learn it"}])


def _run_dir(tmp_path: Path) -> Path:
    tmp_path.mkdir(exist_ok=True)
    _state().save(tmp_path)
    (tmp_path / "request.json").write_text(json.dumps({"task": {"name": "place_table"}, "mode": "rl-gpt"}))
    return tmp_path


def test_report_has_tables_and_plots(tmp_path: Path) -> None:
    text = write_run_report(_run_dir(tmp_path), ended=outcome(planner_pb2.RUN_STATE_DONE)).read_text()
    assert "final task success: **25%** (1/4, 95% CI 5-70%) (policy of table)" in text and "- outcome: finished" in text
    assert "| table | rl | done | 50% | 8000 | 2 |" in text
    # An iteration recorded before per-iteration evaluation reads n/a; a 0% iteration reads 0%, not blank.
    assert "| 0 | 900 | 60 | 4000 | n/a |  |" in text
    assert "| 1 | 700 | 50 | 4000 | 0% | chain: wood (code) -> table (policy j2) |" in text
    assert "1. table (rl) - learn it" in text
    for png in ("curves.png", "iterations.png"):
        assert f"({png})" in text and (tmp_path / png).read_bytes()[:4] == b"\x89PNG"


def test_state_in_memory_wins_over_the_file(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    later = _state()
    later.final = {"success_rate": 1.0, "episodes": 8, "controller": "chain"}
    text = write_run_report(run_dir, later, outcome(planner_pb2.RUN_STATE_FAILED, "the learner went away")).read_text()
    assert "**100%** (8/8, 95% CI 68-100%)" in text and "- outcome: failed: the learner went away" in text


def test_each_training_is_its_own_line(tmp_path: Path, monkeypatch) -> None:
    lines: list[tuple[list, str]] = []
    real_subplots = plt.subplots

    def recording_subplots(*args, **kwargs):
        fig, ax = real_subplots(*args, **kwargs)
        real_plot = ax.plot
        ax.plot = lambda xs, ys, label: (lines.append((list(xs), label)), real_plot(xs, ys, label=label))[1]
        return fig, ax

    monkeypatch.setattr(plt, "subplots", recording_subplots)
    plot_subtask_curves(_state(), tmp_path / "curves.png")
    assert lines == [([0, 1000, 2000], "table (RL training 1, outer iteration 0)"),
                     ([4000, 5000, 6000], "table (RL training 2, outer iteration 1)")]


def test_corrupt_or_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match=r"not a run directory: request\.json is missing"):
        write_run_report(tmp_path)
    run_dir = _run_dir(tmp_path)
    (run_dir / "state.json").write_text("{not json")
    with pytest.raises(FailedPrecondition, match=r"state\.json cannot be read"):
        write_run_report(run_dir)


def test_chunks_carry_every_file_whole_and_in_order(tmp_path: Path) -> None:
    write_run_report(_run_dir(tmp_path))
    chunks = list(report_chunks(tmp_path, chunk_bytes=1000))
    assert chunks[0].name == "report.md" and {c.name for c in chunks} == {"report.md", "curves.png", "iterations.png"}
    for name in ("report.md", "curves.png", "iterations.png"):
        parts = [c for c in chunks if c.name == name]
        data = (tmp_path / name).read_bytes()
        assert [c.offset for c in parts] == list(range(0, len(data), 1000)) and all(c.size == len(data) for c in parts)
        assert b"".join(c.content for c in parts) == data
    (tmp_path / "curves.png").unlink()
    assert "curves.png" not in {c.name for c in report_chunks(tmp_path)}


def test_rlgpt_report_rewrites_a_local_run_directory(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rlgpt.app.cli import app

    run_dir = _run_dir(tmp_path / "run")
    (run_dir / "status.json").write_text(json.dumps({"state": "RUN_STATE_STOPPED", "error": "stopped on request"}))
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0 and result.stdout.strip() == str(run_dir / "report.md")
    assert "- outcome: stopped on request; resumable" in (run_dir / "report.md").read_text()
    result = CliRunner().invoke(app, ["report", str(tmp_path / "nowhere")])
    assert result.exit_code == 1 and "is not a run directory: request.json is missing" in result.output


def test_the_iterations_plot_marks_every_iteration_and_the_final_rate(tmp_path: Path, monkeypatch) -> None:
    notes: list[str] = []
    real_subplots = plt.subplots

    def recording_subplots(*args, **kwargs):
        fig, axes = real_subplots(*args, **kwargs)
        real_annotate = axes[1].annotate
        axes[1].annotate = lambda text, *a, **k: (notes.append(text), real_annotate(text, *a, **k))[1]
        return fig, axes

    monkeypatch.setattr(plt, "subplots", recording_subplots)
    state = _state()
    state.final["links"] = [{"name": "table", "reached": 4, "succeeded": 1, "mean_frames": 412.0}]
    plot_iterations(state, tmp_path / "iterations.png")
    assert notes == ["n/a", "0%", "25%"]  # iteration 0 (not evaluated), iteration 1, final


def test_the_report_says_which_skills_the_llm_wrote_and_how_rl_used_them(tmp_path: Path) -> None:
    steps = [{"op": "collect", "item": "wood", "count": 2}, {"op": "place", "item": "table"}]
    state = _state()
    state.subtasks["wood"] = SubTaskState(name="wood", decision="code", status="done", success_rate=1.0,
                                          skill_code=PROGRAM_HEADER + json.dumps(steps) + "\ndef skill(agent): ...")
    state.subtasks["python"] = SubTaskState(name="python", decision="code", status="failed",
                                            skill_code="def skill(agent):\n    yield 'noop'\n")
    table = state.subtasks["table"]
    table.rl_config = {"skills": ["wood", "table__dig"]}
    table.curve[-1]["skill_frame_fraction"] = 0.42
    text = write_run_report(_run_dir(tmp_path), state).read_text()
    assert "- wood (done, best test success 100%): program: collect wood 2, then place table" in text
    assert "- python (failed, best test success 0%): Python, 2 lines" in text
    assert ("- table: skills in its action space: wood, table__dig; at the end of its last training 42% of the "
            "frames were played by them") in text
