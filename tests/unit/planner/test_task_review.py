"""The whole task decides: the run goes on below its target, the whole task's verdict reopens a link or re-plans,
and a revision replaces the best controller only when it is better on the same worlds, paired."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlgpt import stats
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, planner_pb2
from services.planner import loops as loops_module
from services.planner import task_review
from services.planner.context import Stubs
from services.planner.loops import TwoLoops
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import FinalResult, IterationRecord, RunState, Status, SubTaskState

WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=2))
TABLE = common_pb2.Condition(achievement="place_table")
PLAN = planner_pb2.Plan(subtasks=[
    planner_pb2.SubTask(name="wood", decision=planner_pb2.DECISION_CODE, success=[WOOD]),
    planner_pb2.SubTask(name="table", decision=planner_pb2.DECISION_CODE, success=[TABLE])])


def coded_loops(tmp_path: Path, **settings: Any) -> TwoLoops:
    """A run of place_table with an all-code plan whose sub-tasks are done (code "wood-1", "table-1")."""
    request = planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="place_table", success=[TABLE]),
                                          agents="slow-fast")
    two = TwoLoops(Run(tmp_path / "run", request), RunState(), env_pb2.DescribeResponse(backend="crafter"), None,
                   SkillLibrary(tmp_path / "library.json"), Stubs(env=None, learner=None, critic=None),
                   PlannerSettings(**settings))
    two._adopt_plan(PLAN)
    for name in ("wood", "table"):
        sub = two.state.subtasks[name]
        sub.status, sub.skill_code, sub.success_rate = Status.DONE, f"{name}-1", 1.0
        sub.tests.append({"iteration": 0, "kind": "code", "success_rate": 1.0})
    return two


def record(iteration: int, successes: list[bool], links: list[dict[str, Any]] | None = None) -> IterationRecord:
    return IterationRecord(iteration=iteration, tokens=0, seconds=0.0, frames=0,
                           success_rate=sum(successes) / len(successes), successes=successes, links=links or [])


def test_a_revision_replaces_the_best_controller_only_when_better_on_the_same_worlds(tmp_path: Path) -> None:
    ctx = coded_loops(tmp_path).ctx
    assert task_review.keep_best(ctx, record(0, [True, False, False, False])) == "the first evaluated controller: kept"
    ctx.state.subtasks["table"].skill_code = "table-2"  # a revision that solves another world, loses the first
    decided = task_review.keep_best(ctx, record(1, [False, True, False, False]))
    assert decided.startswith("not better than iteration 0's (paired on 4 worlds: 1 solved only by the new, 1 only")
    assert "exact McNemar p=1" in decided
    assert ctx.state.subtasks["table"].skill_code == "table-1"  # restored
    ctx.state.subtasks["table"].skill_code = "table-3"
    decided = task_review.keep_best(ctx, record(2, [True, True, True, False]))
    assert decided.startswith("kept: better than iteration 0's") and ctx.state.best["iteration"] == 2
    assert ctx.state.best["controllers"]["table"]["skill_code"] == "table-3"


def test_a_pinned_policy_comes_back_with_the_best_controller(tmp_path: Path) -> None:
    ctx = coded_loops(tmp_path).ctx
    sub = ctx.state.subtasks["table"]
    sub.decision, sub.job_id = "rl", "job-1"
    sub.tests.append({"iteration": 0, "kind": "rl", "job_id": "job-1", "success_rate": 0.5})
    task_review.keep_best(ctx, record(0, [True, True, False]))
    sub.job_id = "job-2"
    sub.tests.append({"iteration": 1, "kind": "rl", "job_id": "job-2", "success_rate": 0.75})  # better alone...
    task_review.keep_best(ctx, record(1, [True, False, False]))  # ...worse in the chain
    assert sub.policy_job == "job-1"


def test_the_weakest_link_is_where_most_episodes_end() -> None:
    links = [{"name": "wood", "reached": 32, "succeeded": 30}, {"name": "table", "reached": 30, "succeeded": 10},
             {"name": "pickaxe", "reached": 10, "succeeded": 10}]
    assert task_review.weakest_link(links) == "table"
    assert task_review.weakest_link([{"name": "a", "reached": 4, "succeeded": 2},
                                     {"name": "b", "reached": 2, "succeeded": 0}]) == "a"  # the earlier of equals
    assert task_review.weakest_link([{"name": "a", "reached": 4, "succeeded": 4}]) == ""
    verdict = task_review.measured_task_verdict(record(0, [True, False, False, False], links), 0.8)
    assert verdict.target == critic_pb2.TARGET_FAST and verdict.subtask == "table" and not verdict.success
    assert "25%" in verdict.diagnosis and "table: 10/30" in verdict.diagnosis
    assert task_review.measured_task_verdict(record(0, [False]), 0.8).target == critic_pb2.TARGET_SLOW


def test_a_verdict_reopens_its_link_and_a_slow_one_feeds_the_slow_agent(tmp_path: Path) -> None:
    ctx = coded_loops(tmp_path).ctx
    fast = critic_pb2.Verdict(target=critic_pb2.TARGET_FAST, subtask="table", diagnosis="It never finds a tree.",
                              suggestion="Explore.")
    assert task_review.apply(ctx, PLAN, fast) == "table"
    table = ctx.state.subtasks["table"]
    assert (table.status, table.reopened, table.inner_iterations) == (Status.PENDING, True, 0)
    assert table.feedback == "In the whole task's chain: It never finds a tree. Explore."
    assert not ctx.state.slow_feedback and ctx.state.subtasks["wood"].status == Status.DONE
    slow = critic_pb2.Verdict(target=critic_pb2.TARGET_SLOW, subtask="nonexistent", diagnosis="Zombies kill 20.",
                              suggestion="Add a sub-task that fights.")
    assert task_review.apply(ctx, PLAN, slow) == ""
    assert ctx.state.slow_feedback.endswith("Zombies kill 20. Add a sub-task that fights.")


def test_a_run_below_its_target_goes_on_after_every_subtask_is_done_and_improves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    two = coded_loops(tmp_path, max_outer_iterations=4, target_success=0.75)
    rates = iter([[True, False, False, False], [True, True, True, False]])  # the chain before and after

    def evaluation(ctx: Any) -> FinalResult:
        successes = next(rates)
        table = ctx.state.subtasks["table"].skill_code
        return FinalResult(episodes=4, frames_used=0, controller=f"chain with {table}", successes=successes,
                           success_rate=sum(successes) / 4,
                           links=[{"name": "wood", "reached": 4, "succeeded": 4},
                                  {"name": "table", "reached": 4, "succeeded": sum(successes)}])

    revisions = []

    def code(st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount],
             plan: Any) -> critic_pb2.Verdict:
        revisions.append((st.name, state.feedback))
        state.skill_code = f"{st.name}-2"
        return critic_pb2.Verdict(success=True, success_rate=1.0, target=critic_pb2.TARGET_KEEP)

    monkeypatch.setattr(loops_module, "iteration_evaluation", evaluation)
    two.attempts.code = code
    two._iterate()
    assert [r["success_rate"] for r in two.state.iterations] == [0.25, 0.75]
    assert revisions == [("table", "In the whole task's chain: The whole task succeeded in 25% of its evaluation "
                                   "(target 75%). Per link: wood: 4/4 episodes met its conditions; table: 1/4 "
                                   "episodes met its conditions. Make table succeed where the chain hands it over.")]
    assert two.state.iterations[0]["verdict"]["subtask"] == "table"
    assert two.state.iterations[1]["kept"].startswith("kept: better than iteration 0's")
    assert two.state.stop_reason == "the whole task reached its target: 75% (3/4, 95% CI 30-95%) >= 75%"
    assert two.state.subtasks["table"].skill_code == "table-2"


def test_every_evaluated_iteration_keeps_its_own_chain_a_rolled_back_one_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    two = coded_loops(tmp_path, max_outer_iterations=2, target_success=0.9)
    rates = iter([[True, True, False, False], [True, False, False, False]])  # the revision loses a world
    monkeypatch.setattr(loops_module, "iteration_evaluation", lambda ctx: FinalResult(
        episodes=4, frames_used=0, controller="chain", successes=(s := next(rates)), success_rate=sum(s) / 4,
        links=[{"name": "table", "reached": 4, "succeeded": sum(s)}]))

    def code(st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount],
             plan: Any) -> critic_pb2.Verdict:
        state.skill_code = f"{st.name}-2"
        return critic_pb2.Verdict(success=True, success_rate=1.0, target=critic_pb2.TARGET_KEEP)

    two.attempts.code = code
    two._iterate()
    first, second = two.state.iterations
    assert second["kept"].startswith("not better than iteration 0's")
    assert two.state.subtasks["table"].skill_code == "table-1"  # the best one's code is in force again
    assert [st["name"] for st in second["chain"]["plan"]["subtasks"]] == ["wood", "table"]
    assert {n: c["skill_code"] for n, c in first["chain"]["controllers"].items()} == {"wood": "wood-1",
                                                                                      "table": "table-1"}
    assert second["chain"]["controllers"]["table"]["skill_code"] == "table-2"  # what iteration 1 evaluated


def test_a_run_says_why_it_stopped_below_its_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    two = coded_loops(tmp_path, max_outer_iterations=2, target_success=0.9)
    monkeypatch.setattr(loops_module, "iteration_evaluation", lambda ctx: FinalResult(
        episodes=2, frames_used=0, controller="chain", successes=[True, False], success_rate=0.5,
        links=[{"name": "table", "reached": 2, "succeeded": 1}]))
    two.attempts.code = lambda st, state, start, plan: critic_pb2.Verdict(success=True, target=critic_pb2.TARGET_KEEP)
    two._iterate()
    assert len(two.state.iterations) == 2
    assert two.state.stop_reason == "its 2 outer iterations are spent, below its target of 90%"
    assert two.state.iterations[1]["kept"].startswith("not better than iteration 0's")


def test_wilson_intervals_and_the_exact_mcnemar_test() -> None:
    low, high = stats.wilson_interval(24, 32)
    assert (round(low, 3), round(high, 3)) == (0.579, 0.867)
    assert stats.wilson_interval(0, 0) == (0.0, 1.0) and stats.wilson_interval(0, 8)[0] == 0.0
    assert stats.rate_text(24, 32) == "75% (24/32, 95% CI 58-87%)"
    assert stats.exact_mcnemar_p(0, 0) == 1.0 and stats.exact_mcnemar_p(6, 0) == pytest.approx(2 / 64)
    comparison = stats.paired([True, True, False, True], [False, True, True, False])
    assert (comparison.only_new, comparison.only_old, comparison.new_is_better) == (2, 1, True)


def test_a_game_iteration_sends_the_critic_its_score_and_rates_and_another_sends_neither() -> None:
    game = IterationRecord(iteration=0, tokens=0, seconds=0.0, frames=0, success_rate=0.0, score=3.5,
                           achievement_rates={"collect_wood": 100.0})
    request = critic_pb2.JudgeTaskRequest(task="crafter", **task_review.game_measure(game))
    assert request.HasField("score") and request.score == pytest.approx(3.5)
    assert dict(request.achievement_rates) == {"collect_wood": 100.0}
    other = IterationRecord(iteration=0, tokens=0, seconds=0.0, frames=0, success_rate=0.5)
    assert task_review.game_measure(other) == {}
    assert not critic_pb2.JudgeTaskRequest(**task_review.game_measure(other)).HasField("score")


def test_the_critic_reads_a_links_frames_as_not_known_where_the_env_server_did_not_say(tmp_path: Path) -> None:
    two = coded_loops(tmp_path)
    links = task_review.task_links(PLAN, two, [{"name": "wood", "reached": 4, "succeeded": 3, "mean_frames": None},
                                               {"name": "table", "reached": 3, "succeeded": 1, "mean_frames": 41.5}])
    assert [(x.subtask, x.mean_frames) for x in links] == [("wood", -1.0), ("table", 41.5)]


def test_the_plan_in_force_is_the_kept_iterations_not_a_rolled_back_revisions() -> None:
    from services.planner.task_review import in_force

    iterations = [{"iteration": 0, "success_rate": 0.16}, {"iteration": 1, "success_rate": 0.38},
                  {"iteration": 2, "success_rate": 0.22}, {"iteration": 3, "success_rate": 0.34}]
    # Run 4: iteration 1's chain was kept, 2 and 3 were rolled back to it.
    assert in_force(iterations, {"iteration": 1})["success_rate"] == 0.38
    assert in_force(iterations, {"iteration": 3})["success_rate"] == 0.34
    assert in_force(iterations, None)["success_rate"] == 0.34  # nothing kept yet: the last
    assert in_force([], None) == {}
