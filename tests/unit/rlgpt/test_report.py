"""`rlgpt report`: markdown and plots from a run directory; every training of a sub-task on its curve."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from rlgpt.report import plot_subtask_curves, write_run_report


def _curve(job: str, iteration: int, start: int, rates: list[float]) -> list[dict]:
    return [{"env_frames": start + 1000 * i, "success_rate": r, "mean_return": 0.0, "job_id": job,
             "iteration": iteration} for i, r in enumerate(rates)]


STATE = {
    "frames_used": 8000, "finished": True,
    "final": {"success_rate": 0.25, "episodes": 4, "controller": "policy of table"},
    "subtasks": {"table": {"decision": "rl", "status": "done", "success_rate": 0.5, "frames": 8000,
                           "curve": _curve("a", 0, 0, [0, 0, 0.1]) + _curve("b", 1, 4000, [0.1, 0.3, 0.5]),
                           "tests": [{"frames": 3000, "success_rate": 0.0}, {"frames": 8000, "success_rate": 0.5}]}},
    "iterations": [{"iteration": 0, "tokens": 900, "seconds": 60.0, "frames": 4000},
                   {"iteration": 1, "tokens": 700, "seconds": 50.0, "frames": 4000}],
    "plans": [{"subtasks": [{"name": "table", "decision": "DECISION_RL"}], "rationale": "learn it"}],
}


def test_report_has_tables_and_plots(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps(STATE))
    (tmp_path / "request.json").write_text(json.dumps({"task": {"name": "place_table"}, "mode": "rl-gpt"}))
    text = write_run_report(tmp_path).read_text()
    assert "final task success: **25%** over 4 episodes" in text
    assert "| table | rl | done | 50% | 8000 | 2 |" in text and "| 1 | 700 | 50 | 4000 |" in text
    assert "1. table (rl) - learn it" in text
    for png in ("curves.png", "iterations.png"):
        assert f"({png})" in text and (tmp_path / png).read_bytes()[:4] == b"\x89PNG"


def test_each_training_is_its_own_line(tmp_path: Path, monkeypatch) -> None:
    lines: list[tuple[list, str]] = []
    real_subplots = plt.subplots

    def recording_subplots(*args, **kwargs):
        fig, ax = real_subplots(*args, **kwargs)
        real_plot = ax.plot
        ax.plot = lambda xs, ys, label: (lines.append((list(xs), label)), real_plot(xs, ys, label=label))[1]
        return fig, ax

    monkeypatch.setattr(plt, "subplots", recording_subplots)
    plot_subtask_curves(STATE, tmp_path / "curves.png")
    assert lines == [([0, 1000, 2000], "table (RL training, iteration 0)"),
                     ([4000, 5000, 6000], "table (RL training, iteration 1)")]


def test_corrupt_state_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"state\.json cannot be read"):
        write_run_report(tmp_path)
