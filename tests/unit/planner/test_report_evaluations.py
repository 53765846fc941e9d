"""The report's whole-task evaluations: every rate with its Wilson 95% interval (also for a state written before
per-world successes), error bars on the iterations plot, the final chain link by link next to each sub-task's own
success, each iteration's verdict, the final controller's GIFs and why the run stopped."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from rlgpt.stats import wilson_interval
from services.planner.report import write_run_report
from services.planner.report_evaluations import evaluation_text
from services.planner.report_plots import plot_iterations
from services.planner.state import RunState, SubTaskState

VERDICT = {"target": "TARGET_FAST", "subtask": "pickaxe", "diagnosis": "dies at night before the pickaxe",
           "suggestion": "place the table nearer", "death_causes": {"zombie": 5, "arrow": 2}}


def _state() -> RunState:
    wood = SubTaskState(name="wood", decision="code", status="done", success_rate=1.0, tests=[{"success_rate": 1.0}])
    pickaxe = SubTaskState(name="pickaxe", decision="rl", status="done", success_rate=1.0,
                           tests=[{"success_rate": 1.0}])
    links = [{"name": "wood", "reached": 32, "succeeded": 30, "mean_frames": 14.2},
             {"name": "pickaxe", "reached": 30, "succeeded": 12, "mean_frames": 80.0}]
    return RunState(
        subtasks={"wood": wood, "pickaxe": pickaxe}, frames_used=30000, finished=True,
        stop_reason="the outer iterations are spent (2 of 2); the whole task is below its target 80%",
        iterations=[{"iteration": 0, "tokens": 900, "seconds": 60.0, "frames": 20000, "success_rate": 0.25,
                     "episodes": 32, "successes": [True] * 8 + [False] * 24, "controller": "chain: wood -> pickaxe",
                     "links": links, "verdict": VERDICT, "kept": "the first controller"},
                    {"iteration": 1, "tokens": 700, "seconds": 50.0, "frames": 10000, "success_rate": 0.375,
                     "episodes": 32, "successes": [True] * 12 + [False] * 20, "controller": "chain: wood -> pickaxe",
                     "kept": "kept: paired on 32 worlds, 4 solved only by the new, 0 only by the old"}],
        final={"episodes": 32, "frames_used": 30000, "controller": "chain: wood -> pickaxe", "success_rate": 0.375,
               "successes": [True] * 12 + [False] * 20, "seed": 1000, "links": links,
               "animations": {"success": "animations/final_success.gif", "failure": "animations/final_failure.gif"}})


def _report(tmp_path: Path, state: RunState) -> str:
    (tmp_path / "request.json").write_text(json.dumps({"task": {"name": "make_pickaxe"},
                                                       "budgets": {"target_success": 0.8}}))
    return write_run_report(tmp_path, state).read_text()


def test_every_evaluation_says_its_interval(tmp_path: Path) -> None:
    text = _report(tmp_path, _state())
    assert "- final task success: **38%** (12/32, 95% CI 23-55%) on worlds 1000..1031 (chain: wood -> pickaxe)" in text
    assert "| 0 | 900 | 60 | 20000 | 25% (8/32, 95% CI 13-42%) | chain: wood -> pickaxe |" in text
    assert "| 1 | 700 | 50 | 10000 | 38% (12/32, 95% CI 23-55%) |" in text
    assert "- stopped because: the outer iterations are spent (2 of 2)" in text


def test_the_link_table_puts_each_subtask_beside_its_link(tmp_path: Path) -> None:
    text = _report(tmp_path, _state())
    assert "| wood | 100% | 32 | 94% (30/32, 95% CI 80-98%) | 14 |" in text
    assert "| pickaxe | 100% | 30 | 40% (12/30, 95% CI 25-58%) | 80 |" in text  # tested on worlds of its own


def test_a_link_whose_frames_are_not_known_says_so_not_zero(tmp_path: Path) -> None:
    state = _state()
    state.final["links"] = [{"name": "wood", "reached": 32, "succeeded": 30, "mean_frames": None},
                            {"name": "pickaxe", "reached": 30, "succeeded": 12, "mean_frames": 0.0}]
    text = _report(tmp_path, state)
    assert "| wood | 100% | 32 | 94% (30/32, 95% CI 80-98%) | n/a |" in text  # an older env server's chain
    assert "| pickaxe | 100% | 30 | 40% (12/30, 95% CI 25-58%) | 0 |" in text


def test_each_iteration_says_its_verdict_and_the_final_controller_plays(tmp_path: Path) -> None:
    text = _report(tmp_path, _state())
    assert ("- iteration 0: 25% (8/32, 95% CI 13-42%); the first controller; verdict to the fast agent on pickaxe; "
            "deaths: zombie 5, arrow 2; diagnosis: dies at night before the pickaxe; suggestion: place the table "
            "nearer") in text
    assert "- iteration 1: 38% (12/32, 95% CI 23-55%); kept: paired on 32 worlds" in text
    assert "![success](animations/final_success.gif) | ![failure](animations/final_failure.gif)" in text


def test_an_old_state_reads_with_intervals_from_its_rates(tmp_path: Path) -> None:
    old = {"outer_iteration": 1, "frames_used": 100, "finished": True, "subtasks": {},
           "iterations": [{"iteration": 0, "tokens": 1, "seconds": 1.0, "frames": 100, "success_rate": 0.75,
                           "controller": "chain", "episodes": 8, "failed": []}],
           "final": {"episodes": 8, "frames_used": 100, "controller": "chain", "success_rate": 0.5,
                     "links": [{"name": "gone", "reached": 8, "succeeded": 4, "mean_frames": 78.1}]}}
    (tmp_path / "state.json").write_text(json.dumps(old))
    (tmp_path / "request.json").write_text(json.dumps({"task": {"name": "t"}}))
    text = write_run_report(tmp_path).read_text()
    assert "**50%** (4/8, 95% CI 22-78%) (chain)" in text and "| 75% (6/8, 95% CI 41-93%) | chain |" in text
    assert "| gone | - | 8 | 50% (4/8, 95% CI 22-78%) | 78 |" in text  # no sub-task of that name
    assert "stopped because" not in text and "at play" not in text and "after each iteration" not in text
    assert evaluation_text({"success_rate": 0.5}) == "50%" and evaluation_text(None) == "n/a"


def test_the_iterations_plot_has_error_bars(tmp_path: Path, monkeypatch) -> None:
    bars: list[tuple[list, list]] = []
    real_subplots = plt.subplots

    def recording_subplots(*args, **kwargs):
        fig, axes = real_subplots(*args, **kwargs)
        real_errorbar = axes[1].errorbar
        axes[1].errorbar = lambda xs, ys, yerr, **k: (bars.append((list(xs), yerr)), real_errorbar(xs, ys, yerr,
                                                                                                   **k))[1]
        return fig, axes

    monkeypatch.setattr(plt, "subplots", recording_subplots)
    state = _state()
    for it in state.iterations:
        it["iteration"] += 1
    state.iterations.insert(0, {"iteration": 0, "tokens": 5, "seconds": 1.0, "frames": 1})  # not evaluated
    path = plot_iterations(state, tmp_path / "iterations.png", target=0.8)
    [(positions, (below, above))] = bars
    assert positions == [1, 2, 3]  # the iteration not evaluated gets no bar
    intervals = [(k / 32, *wilson_interval(k, 32)) for k in (8, 12, 12)]  # iterations 1 and 2, final
    assert below == pytest.approx([p - low for p, low, _ in intervals])
    assert above == pytest.approx([high - p for p, _, high in intervals])
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_a_game_runs_plot_shows_its_scores_not_a_success_rate(tmp_path: Path, monkeypatch) -> None:
    axes_made: list = []
    real_subplots = plt.subplots

    def recording_subplots(*args, **kwargs):
        fig, axes = real_subplots(*args, **kwargs)
        axes_made.append(axes)
        monkeypatch.setattr(fig, "savefig", lambda *a, **k: None)  # the axes are read after the plot closes
        return fig, axes

    monkeypatch.setattr(plt, "subplots", recording_subplots)
    state = RunState(iterations=[{"iteration": 0, "tokens": 5, "seconds": 1.0, "frames": 1, "success_rate": 0.0,
                                  "episodes": 32, "score": 46.2}],
                     game_controller={"score": 12.5}, final={"episodes": 32, "score": 44.0, "success_rate": 0.0})
    plot_iterations(state, tmp_path / "iterations.png", target=0.273)
    right = axes_made[0][1]
    assert right.get_ylabel() == "the game's score (0-100)"
    assert [t.get_text() for t in right.get_xticklabels()] == ["iter 0", "macro-action\npolicy", "final"]
    assert [round(p.get_height(), 1) for p in right.patches] == [46.2, 12.5, 44.0]
    assert [t.get_text() for t in right.texts if t.get_text().startswith("target")] == ["target\n27.3"]
