"""bench-rlgpt takes a run's numbers from the planner's events (never its files) and ranks the modes from them."""

from __future__ import annotations

from typing import Any

from benchmarks.rlgpt.events import run_numbers
from benchmarks.rlgpt.report import TITLE, ranking, render_section
from rlgpt.v1 import learner_pb2, planner_pb2


def event(seq: int, **payload: Any) -> planner_pb2.RunEvent:
    return planner_pb2.RunEvent(run_id="r1", seq=seq, **payload)


def progress(job: str, frames: int, success: float) -> learner_pb2.JobProgress:
    return learner_pb2.JobProgress(job_id=job, env_frames=frames, success_rate=success)


def test_numbers_from_the_events_of_a_run() -> None:
    plan = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="collect_wood", decision=planner_pb2.DECISION_CODE),
                                      planner_pb2.SubTask(name="place_table", decision=planner_pb2.DECISION_RL)])
    events = [
        event(1, llm=planner_pb2.LlmCall(agent="slow", prompt_tokens=100, completion_tokens=20)),
        event(2, plan=plan),
        event(3, code=planner_pb2.CodeEvent(skill="collect_wood", success_rate=1.0, frames=120)),
        event(4, training=progress("j1", 1000, 0.0)),
        event(5, training=progress("j1", 4000, 0.0)),
        event(6, llm=planner_pb2.LlmCall(agent="fast", prompt_tokens=50, completion_tokens=5)),
        event(7, training=progress("j2", 2000, 0.0)),
        event(8, training=progress("j2", 3000, 0.25)),  # 4,000 frames of j1 before it
        event(9, training=progress("j2", 5000, 0.5)),
        event(10, run_end=planner_pb2.RunEnd(success_rate=0.625, report="/planner/disk/report.md", frames_used=9120,
                                             controller="policy of place_table (job j2) on the whole task")),
    ]
    assert run_numbers(events) == {
        "success_rate": 0.625, "ended": True, "tokens": 175, "training_frames": 9000, "skill_test_frames": 120,
        "frames_used": 9120, "controller": "policy of place_table (job j2) on the whole task",
        "frames_to_first_training_success": 7000, "plan": "collect_wood (code), place_table (rl)", "error": ""}


def test_a_failed_run_has_its_error_and_no_success() -> None:
    numbers = run_numbers([event(1, training=progress("j1", 500, 0.0)),
                           event(2, error=planner_pb2.ErrorEvent(message="learner unavailable", resumable=True))])
    assert numbers["ended"] is False and numbers["success_rate"] == 0.0
    assert numbers["error"] == "learner unavailable" and numbers["frames_to_first_training_success"] is None
    assert numbers["training_frames"] == 500


def run(mode: str, success: float, first: int | None) -> dict[str, Any]:
    return {"task": "collect_stone", "mode": mode, "success_rate": success, "frames_to_first_training_success": first,
            "training_frames": 30000, "tokens": 0, "plan": "", "error": ""}


def test_ranking_follows_the_results() -> None:
    assert ranking("collect_stone", [run("pure-rl", 0.0, None), run("rl-gpt", 0.75, 12000),
                                     run("pure-code", 0.75, None)]) == (
        "On `collect_stone`, the highest final success was 75% (`rl-gpt` and `pure-code`); `pure-rl` reached 0%; of "
        "the modes whose training succeeded at all, `rl-gpt` got there in the fewest training frames (12,000).")
    assert ranking("collect_stone", [run("pure-rl", 0.0, None), run("rl-gpt", 0.0, None)]) == (
        "On `collect_stone`, no mode succeeded in the final evaluation.")


def test_section_without_a_figure() -> None:
    results = {"date_utc": "2026-01-01 00:00 UTC", "machine": "Test CPU, 2 cores", "llm": "test model",
               "settings": {"frames": 30000, "eval_episodes": 8, "outer": 2, "inner": 2}, "total_seconds": 600.0,
               "reference_skills": ["collect_wood"], "runs": [run("pure-rl", 0.5, 9000)]}
    section = render_section(results)
    assert section.startswith(TITLE)
    assert "| collect_stone | pure-rl | 50% | 9,000 | 30,000 | 0 | 0 | - | - |" in section
    assert "![success by mode]" not in section


def test_section_with_its_figure(tmp_path) -> None:
    results = {"date_utc": "2026-01-01 00:00 UTC", "machine": "Test CPU, 2 cores", "llm": "test model",
               "settings": {"frames": 30000, "eval_episodes": 8, "outer": 2, "inner": 2}, "total_seconds": 600.0,
               "reference_skills": [], "runs": [run("pure-rl", 0.5, 9000), run("rl-gpt", 1.0, 3000)]}
    section = render_section(results, tmp_path / "figures" / "modes.png")
    assert "![success by mode](figures/modes.png)" in section
    assert (tmp_path / "figures" / "modes.png").stat().st_size > 0
