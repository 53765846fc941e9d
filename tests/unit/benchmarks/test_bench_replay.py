"""bench-replay's sentences come from the recorded and replayed numbers."""

from __future__ import annotations

from benchmarks.bench_replay import summary_sentences


def rec(task: str, success: float, frames: int, best: dict[str, float]) -> dict:
    return {"task": task, "success_rate": success, "frames_used": frames, "subtask_best": best}


def rep(success: float, frames: int) -> dict:
    return {"success_rate": success, "frames_used": frames}


def test_solved_unsolved_and_reproduced_runs_are_said_as_measured() -> None:
    pairs = [(rec("collect_stone", 1.0, 103, {"a": 1.0}), rep(1.0, 103)),
             (rec("collect_diamond", 0.0, 2927, {"a": 1.0, "collect_diamond": 0.75}), rep(0.0, 2927))]
    text = " ".join(summary_sentences(pairs))
    assert "1 of 2 recorded runs solved their task (collect_stone)" in text
    assert "collect_diamond ended at 0%" in text and "1 of 2 sub-tasks passed" in text
    assert "not collect_diamond (best 75%)" in text
    assert "2 of 2 runs reproduced" in text


def test_a_replay_that_differs_is_not_counted_as_reproduced() -> None:
    pairs = [(rec("collect_stone", 1.0, 103, {"a": 1.0}), rep(0.5, 140)), (rec("x", 1.0, 5, {}), None)]
    text = " ".join(summary_sentences(pairs))
    assert "0 of 1 runs reproduced" in text and "2 of 2 recorded runs solved their task (collect_stone, x)" in text
