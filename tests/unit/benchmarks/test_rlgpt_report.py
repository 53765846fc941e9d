"""bench-rlgpt takes a run's numbers from the planner's events (never its files) and ranks the modes from them."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from benchmarks.bench_rlgpt import DEFAULT_FRAMES, default_run_count, main, planned_runs
from benchmarks.common import save_results
from benchmarks.rlgpt.events import run_numbers
from benchmarks.rlgpt.report import (
    AGENT_SETUPS,
    TITLE,
    ablation_sentence,
    ablation_table,
    iteration_sentence,
    iteration_table,
    overspent,
    paired_sentence,
    paper_order_sentence,
    ranking,
    render_section,
)
from rlgpt.v1 import learner_pb2, planner_pb2
from services.planner.context import AgentSetup
from services.planner.controller import NO_CONTROLLER


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
        "frames_to_first_training_success": 7000, "plan": "collect_wood (code), place_table (rl)", "error": "",
        "iterations": [], "iteration_controllers": []}


def test_success_per_iteration_from_the_iteration_end_events() -> None:
    """The rate after each outer iteration, indexed by the event's iteration; an unset rate is None."""
    numbers = run_numbers([
        event(1, iteration_end=planner_pb2.IterationEnd(iteration=0, controller=NO_CONTROLLER, frames=300)),
        event(2, iteration_end=planner_pb2.IterationEnd(iteration=1, success_rate=0.0, controller="chain: a (code)")),
        event(3, iteration_end=planner_pb2.IterationEnd(iteration=2, success_rate=0.25, controller="chain: b")),
        event(4, run_end=planner_pb2.RunEnd(success_rate=0.375)),
    ])
    assert numbers["iterations"] == [None, 0.0, 0.25]
    assert numbers["iteration_controllers"] == [NO_CONTROLLER, "chain: a (code)", "chain: b"]
    assert numbers["success_rate"] == 0.375


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
    assert "| collect_stone | pure-rl | - | 50% | 9,000 | 30,000 | 0 | 0 | - | - | - |" in section
    assert "![success by mode]" not in section


def test_section_with_its_figure(tmp_path) -> None:
    results = {"date_utc": "2026-01-01 00:00 UTC", "machine": "Test CPU, 2 cores", "llm": "test model",
               "settings": {"frames": 30000, "eval_episodes": 8, "outer": 2, "inner": 2}, "total_seconds": 600.0,
               "reference_skills": [], "runs": [run("pure-rl", 0.5, 9000), run("rl-gpt", 1.0, 3000)]}
    section = render_section(results, tmp_path / "figures" / "modes.png")
    assert "![success by mode](figures/modes.png)" in section
    assert (tmp_path / "figures" / "modes.png").stat().st_size > 0


# --- the agent ablation and success per iteration -------------------------------------------------------------
PNG = b"\x89PNG\r\n\x1a\n"


def ablated(task: str, agents: str, success: float, rates: list[float | None], error: str = "") -> dict[str, Any]:
    return {**run("rl-gpt", success, None), "task": task, "agents": agents, "iterations": rates, "seconds": 240.0,
            "error": error}


def ablation_results() -> dict[str, Any]:
    return {"date_utc": "2026-01-01 00:00 UTC", "machine": "Test CPU, 2 cores", "llm": "embedded test model",
            "settings": {"frames": DEFAULT_FRAMES, "eval_episodes": 8, "outer": 2, "inner": 2,
                         "agents": ["one", "slow-fast", "slow-fast-critic"], "default_frames": DEFAULT_FRAMES,
                         "default_runs": 12},
            "total_seconds": 3000.0, "reference_skills": ["collect_wood", "place_table"],
            "runs": [{**run("pure-rl", 0.0, None), "task": "make_wood_pickaxe", "agents": "", "iterations": [],
                      "seconds": 200.0},
                     {**run("pure-code", 0.0, None), "task": "make_wood_pickaxe", "agents": "slow-fast-critic",
                      "iterations": [None, None], "seconds": 300.0},
                     ablated("make_wood_pickaxe", "one", 0.0, [0.0, 0.0]),
                     ablated("make_wood_pickaxe", "slow-fast", 0.25, [0.0, 0.25]),
                     ablated("make_wood_pickaxe", "slow-fast-critic", 0.5, [0.125, 0.5]),
                     ablated("collect_stone", "one", 0.25, [None, 0.25]),
                     ablated("collect_stone", "slow-fast", 0.25, [0.25]),
                     ablated("collect_stone", "slow-fast-critic", 0.0, [0.0, 0.0]),
                     ablated("collect_diamond", "one", 0.0, [None, None]),
                     ablated("collect_diamond", "slow-fast", 0.0, [0.0, 0.0], error="learner unavailable"),
                     ablated("collect_diamond", "slow-fast-critic", 0.0, [0.0, 0.0])]}


def test_the_report_knows_every_agent_setup_of_the_planner() -> None:
    assert set(AGENT_SETUPS) == {setup.value for setup in AgentSetup}


def test_every_rl_gpt_run_once_per_agent_setup_and_the_other_modes_once() -> None:
    assert planned_runs(["a"], ["pure-rl", "pure-code", "rl-gpt", "rl+reference-skills"], ["one", "slow-fast"]) == [
        ("a", "pure-rl", ""), ("a", "pure-code", "slow-fast-critic"), ("a", "rl-gpt", "one"),
        ("a", "rl-gpt", "slow-fast"), ("a", "rl+reference-skills", "")]
    assert default_run_count() == 12


def test_ablation_table_has_a_column_per_setup_and_the_success_per_iteration_in_its_cells() -> None:
    table = ablation_table(ablation_results()["runs"])
    assert table[0] == "| task | one | slow-fast | slow-fast-critic |"
    assert "| make_wood_pickaxe | 0% (0% -> 0%) | 25% (0% -> 25%) | 50% (12.5% -> 50%) |" in table
    assert "| collect_stone | 25% (n/a -> 25%) | 25% (25%) | 0% (0% -> 0%) |" in table
    assert "| collect_diamond | 0% (n/a -> n/a) | 0% (0% -> 0%), run failed | 0% (0% -> 0%) |" in table
    assert not any("pure-code" in line or "pure-rl" in line for line in table)


def test_ablation_sentences_say_the_best_the_ties_and_when_nothing_succeeded() -> None:
    runs = ablation_results()["runs"]

    def of(task: str) -> list[dict[str, Any]]:
        return [r for r in runs if r["task"] == task and r["mode"] == "rl-gpt"]

    assert ablation_sentence("make_wood_pickaxe", of("make_wood_pickaxe")) == (
        "On `make_wood_pickaxe`, `slow-fast-critic` was best with 50% final success (`one` 0%, `slow-fast` 25%).")
    assert ablation_sentence("collect_stone", of("collect_stone")) == (
        "On `collect_stone`, `one` and `slow-fast` tied for best at 25% final success (`slow-fast-critic` 0%).")
    assert ablation_sentence("collect_diamond", of("collect_diamond")) == (
        "On `collect_diamond`, no setup succeeded: `one`, `slow-fast` and `slow-fast-critic` all reached 0% final "
        "success.")
    tied = [ablated("t", "one", 0.5, []), ablated("t", "slow-fast", 0.5, [])]
    assert ablation_sentence("t", tied) == "On `t`, `one` and `slow-fast` tied at 50% final success."
    assert paper_order_sentence(runs) == (
        "The paper's ordering of final success, `one` < `slow-fast` < `slow-fast-critic` strictly, held on 1 of 3 "
        "tasks (`make_wood_pickaxe`).")
    assert paper_order_sentence(runs[:4]) == ""  # no task with all three setups


def test_success_per_iteration_table_and_sentence() -> None:
    runs = ablation_results()["runs"]
    table = iteration_table(runs)
    assert table[0] == "| task | mode | agents | after iteration 0 | after iteration 1 | final |"
    assert "| make_wood_pickaxe | pure-code | slow-fast-critic | n/a | n/a | 0% |" in table
    assert "| make_wood_pickaxe | rl-gpt | slow-fast | 0% | 25% | 25% |" in table
    assert "| collect_stone | rl-gpt | slow-fast | 25% | - | 25% |" in table  # ended after iteration 0
    assert not any("pure-rl" in line for line in table)  # pure RL has no outer iterations
    assert iteration_sentence(runs) == (
        "Of the 6 runs with at least two evaluated iterations, success from the first to the last evaluated "
        "iteration rose in 2 (`make_wood_pickaxe` rl-gpt (slow-fast), `make_wood_pickaxe` rl-gpt (slow-fast-critic)) "
        "and stayed the same in 4. 5 of 19 iterations could not be evaluated (n/a: no controller for the whole task "
        "yet, or its evaluation failed).")


def test_section_with_the_ablation_and_its_plots(tmp_path) -> None:
    section = render_section(ablation_results(), tmp_path / "figures" / "rlgpt_modes.png")
    assert "LLM: embedded test model" in section
    assert f"budget {DEFAULT_FRAMES:,} env frames per run" in section and "12 default runs" in section
    assert "| make_wood_pickaxe | rl-gpt | slow-fast | 25% |" in section
    assert "| make_wood_pickaxe | pure-rl | - | 0% |" in section
    assert "### Agent ablation" in section and "### Success per iteration" in section
    assert "`slow-fast-critic` was best with 50%" in section and "held on 1 of 3 tasks" in section
    assert "![success per iteration](figures/rlgpt_iterations.png)" in section
    for name in ("rlgpt_modes.png", "rlgpt_iterations.png"):
        assert (tmp_path / "figures" / name).read_bytes().startswith(PNG)


def test_results_saved_before_the_ablation_still_render(tmp_path) -> None:
    """Old results.json: no agents, no iterations, no default budget in the settings, runs without seconds."""
    results = {"date_utc": "2026-01-01 00:00 UTC", "machine": "Test CPU, 2 cores", "llm": "test model",
               "settings": {"frames": 30000, "eval_episodes": 8, "outer": 2, "inner": 2}, "total_seconds": 2220.0,
               "reference_skills": [], "runs": [run("pure-rl", 0.0, None), run("rl-gpt", 0.0, None),
                                                run("pure-code", 0.0, None)]}
    section = render_section(results, tmp_path / "figures" / "rlgpt_modes.png")
    assert "| collect_stone | rl-gpt | - | 0% |" in section
    assert "the final evaluation of 8 whole-task episodes" in section and "default runs" not in section
    assert "record no agent setup" in section and "record no success per iteration" in section
    assert "![success by mode](figures/rlgpt_modes.png)" in section and "success per iteration](" not in section
    assert (tmp_path / "figures" / "rlgpt_modes.png").read_bytes().startswith(PNG)
    assert not (tmp_path / "figures" / "rlgpt_iterations.png").exists()


def test_report_only_rebuilds_the_section_from_old_results(tmp_path) -> None:
    """`--report-only` on a results.json saved before the ablation: the section and its plot are written."""
    results = {"date_utc": "2026-01-01 00:00 UTC", "machine": "Test CPU, 2 cores", "llm": "test model",
               "settings": {"frames": 30000, "eval_episodes": 8, "outer": 2, "inner": 2}, "total_seconds": 2220.0,
               "reference_skills": [], "runs": [run("pure-rl", 0.0, None), run("rl-gpt", 0.25, 4000)]}
    save_results(tmp_path / "raw" / "bench-rlgpt.json", results)
    output = tmp_path / "docs" / "BENCHMARKS.md"
    main(output=output, work=tmp_path / "work", results=tmp_path / "raw" / "bench-rlgpt.json", report_only=True)
    assert TITLE in output.read_text()
    assert (tmp_path / "docs" / "figures" / "rlgpt_modes.png").read_bytes().startswith(PNG)


def test_an_unknown_agent_setup_is_refused() -> None:
    with pytest.raises(typer.BadParameter, match="two-agents"):
        main(agents="one,two-agents", report_only=True)


def test_section_names_the_skill_format_it_ran_with() -> None:
    results = {"date_utc": "2026-01-01 00:00 UTC", "machine": "Test CPU, 2 cores", "llm": "test model",
               "settings": {"frames": 30000, "eval_episodes": 8, "outer": 2, "inner": 2}, "total_seconds": 600.0,
               "reference_skills": [], "runs": [run("pure-rl", 0.5, 9000)], "skill_format": "python"}
    assert "skills written as RLGPT_SKILL_FORMAT=python (Python code)" in render_section(results)
    del results["skill_format"]  # results saved before the bench recorded it
    assert "RLGPT_SKILL_FORMAT" not in render_section(results)


def test_modes_are_compared_world_by_world_where_they_played_the_same_worlds() -> None:
    ours = run("rl-gpt", 0.75, 12000) | {"agents": "slow-fast-critic",
                                        "final": {"seed": 7001000, "successes": [True, True, True, False]}}
    rl = run("pure-rl", 0.25, None) | {"final": {"seed": 7001000, "successes": [False, False, True, True]}}
    elsewhere = run("pure-code", 1.0, None) | {"final": {"seed": 5, "successes": [True] * 4}}  # other worlds
    old = run("pure-code", 1.0, None)  # saved before the bench kept worlds
    text = paired_sentence("collect_stone", [ours, rl, elsewhere, old])
    assert text == ("On `collect_stone`, paired: `rl-gpt (slow-fast-critic)` vs `pure-rl` on the same 4 worlds (from "
                    "world 7001000): 2 solved only by `rl-gpt (slow-fast-critic)`, 1 only by `pure-rl` (exact McNemar "
                    "p=1).")
    assert paired_sentence("collect_stone", [rl, old]) == ""


def test_a_run_over_its_frame_budget_is_named() -> None:
    within = run("pure-rl", 0.0, None) | {"training_frames": 20480, "skill_test_frames": 0}
    over = run("rl-gpt", 0.0, None) | {"agents": "slow-fast-critic", "training_frames": 28616, "skill_test_frames": 306}
    assert overspent([within, over], 30000) == ""
    assert overspent([within, over], 20000) == (
        "Over the budget of 20,000 frames (a learner overshoot, not a setting; these runs do not compare at equal "
        "frames): `collect_stone` / `pure-rl` 20,480 and `collect_stone` / `rl-gpt (slow-fast-critic)` 28,922.")
