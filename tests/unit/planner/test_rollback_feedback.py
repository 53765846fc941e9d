"""After a revision that does no better than the best controller on the same worlds is rolled back
(services/planner/task_review.py: keep_best, restore), the next iteration's work is decided on the plan in force
(services/planner/loops.py: _evaluate_iteration): the slow agent reads the restored plan's unfinished sub-tasks and
that its revision was rolled back, with both measures; a verdict reopens only a link of the plan in force; a game's
deaths are labelled as the revision's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_game_measure import game_loops
from test_task_review import PLAN, coded_loops

from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, planner_pb2
from services.planner import loops as loops_module
from services.planner import task_review
from services.planner.loops import TwoLoops
from services.planner.state import FinalResult, IterationRecord, RunState, Status, SubTaskState

SHELTER = planner_pb2.SubTask(name="shelter", decision=planner_pb2.DECISION_CODE,
                              success=[common_pb2.Condition(achievement="place_stone")])
REVISION = planner_pb2.Plan(subtasks=[PLAN.subtasks[0], SHELTER])
"""The slow agent's revision: table replaced by a sub-task only this plan has."""
LINKS = [{"name": "wood", "reached": 4, "succeeded": 4}, {"name": "shelter", "reached": 4, "succeeded": 1}]


def scripted(two: TwoLoops, monkeypatch: pytest.MonkeyPatch, rates: list[list[bool]]) -> list[str]:
    """Evaluations that succeed on ``rates`` in turn; the slow agent answers the revision, then the first plan
    again; table's code never passes, shelter's does. Returns the feedback the slow agent was given, per re-plan."""
    evaluations, plans, feedbacks = iter(rates), iter([REVISION, PLAN]), []

    def evaluation(ctx: Any) -> FinalResult:
        successes = next(evaluations)
        return FinalResult(episodes=4, frames_used=0, controller="chain", successes=successes,
                           success_rate=sum(successes) / 4, links=LINKS)

    def new_plan(previous: planner_pb2.Plan | None) -> planner_pb2.Plan:
        feedbacks.append(two.state.slow_feedback)
        return next(plans)

    def code(st: planner_pb2.SubTask, state: SubTaskState, start: Any, plan: Any) -> critic_pb2.Verdict:
        if st.name == "table":
            return critic_pb2.Verdict(target=critic_pb2.TARGET_SLOW, diagnosis="It never finds a tree.")
        return critic_pb2.Verdict(success=True, success_rate=1.0, target=critic_pb2.TARGET_KEEP)

    monkeypatch.setattr(loops_module, "iteration_evaluation", evaluation)
    monkeypatch.setattr(two, "_new_plan", new_plan)
    two.attempts.code = code
    return feedbacks


def test_the_slow_agent_reads_the_restored_plan_and_that_its_revision_was_rolled_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    two = coded_loops(tmp_path, max_outer_iterations=3, target_success=0.9)
    two.state.subtasks["table"].status = Status.PENDING  # its code fails: the best plan has an unfinished link
    feedbacks = scripted(two, monkeypatch, [[True, True, False, False], [True, False, False, False],
                                            [True, True, False, False]])
    two._iterate()
    assert two.state.iterations[1]["kept"].startswith("not better than iteration 0's")
    assert len(feedbacks) == 2  # the revision's plan, then the plan after it was rolled back
    after = feedbacks[1]
    assert after.startswith("Iteration 1's revision did not beat the best controller on the same worlds: "
                            "25% (1/4, 95% CI 5-70%) against iteration 0's 50% (2/4, 95% CI 15-85%). It was "
                            "rolled back: the plan, skills and policies in force are iteration 0's again.")
    assert "- table (code): failed, success 0%; It never finds a tree." in after
    assert "shelter" not in after  # a sub-task of the rolled-back plan only
    assert not two.state.iterations[1]["verdict"]  # the plan in force has work left: no verdict on it
    shelter = two.state.subtasks["shelter"]
    assert (shelter.status, shelter.reopened) == (Status.DONE, False)


def test_a_verdict_after_a_roll_back_reopens_only_a_link_of_the_plan_in_force(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    two = coded_loops(tmp_path, max_outer_iterations=3, target_success=0.9)
    feedbacks = scripted(two, monkeypatch, [[True, True, False, False], [True, False, False, False],
                                            [True, True, False, False]])
    verdicts = iter([critic_pb2.Verdict(target=critic_pb2.TARGET_SLOW, diagnosis="Re-plan."),
                     critic_pb2.Verdict(target=critic_pb2.TARGET_FAST, subtask="shelter",
                                        diagnosis="shelter loses 3 of 4 episodes.")])
    judged_on = []

    def judged(ctx: Any, plan: planner_pb2.Plan, *_: Any) -> critic_pb2.Verdict:
        judged_on.append([st.name for st in plan.subtasks])
        return next(verdicts)

    monkeypatch.setattr(task_review, "judged", judged)
    two._iterate()
    assert judged_on == [["wood", "table"], ["wood", "table"]]  # the second on the restored plan, not the revision
    assert two.state.iterations[1]["verdict"]["subtask"] == "shelter"
    shelter = two.state.subtasks["shelter"]
    assert (shelter.status, shelter.reopened) == (Status.DONE, False)  # only the rolled-back plan had it
    assert len(feedbacks) == 2 and feedbacks[1].startswith("Iteration 1's revision did not beat the best controller")


def test_a_games_rolled_back_revision_is_told_by_score_and_its_deaths_are_the_revisions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, describe: env_pb2.DescribeResponse) -> None:
    two = game_loops(tmp_path, describe)
    task_review.keep_best(two.ctx, IterationRecord(iteration=0, tokens=0, seconds=0.0, frames=0, success_rate=0.0,
                                                   successes=[False] * 2, score=5.0))
    two._adopt_plan(REVISION)
    two.state.subtasks["shelter"].status = Status.DONE
    two.state.outer_iteration = 1
    died = [common_pb2.EpisodeSummary(death_cause="zombie", steps=200, stages_done=[True, False])] * 2
    monkeypatch.setattr(loops_module, "iteration_evaluation", lambda ctx: FinalResult(
        episodes=2, frames_used=0, controller="chain", successes=[False] * 2, score=3.0, links=LINKS,
        episode_summaries=died))
    two._evaluate_iteration(IterationRecord(iteration=1, tokens=0, seconds=0.0, frames=0), REVISION)
    feedback = two.state.slow_feedback
    assert feedback.startswith("Iteration 1's revision did not beat the best controller on the same worlds: "
                               "score 3.0 against iteration 0's score 5.0. It was rolled back")
    assert "Deaths in the rolled-back revision's evaluation: 2 of 2 episodes" in feedback
    assert "Where: before shelter was done 2." in feedback  # the revision's chain, where its episodes died
    assert [st.name for st in two.state.plan_proto().subtasks] == ["wood", "table"]
    assert not two.state.subtasks["shelter"].reopened


def test_a_run_stopped_after_its_re_plan_resumes_on_that_plan_without_asking_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The slow agent's answer is adopted and its feedback consumed in one saved step: a run stopped later in the
    iteration (here: while coding) resumes that iteration on the adopted plan, with no second slow-agent call."""
    two = coded_loops(tmp_path, max_outer_iterations=3)
    two.state.slow_feedback = "The whole task after iteration 0: re-plan."
    asked: list[str] = []

    def new_plan(previous: planner_pb2.Plan | None) -> planner_pb2.Plan:
        asked.append(two.state.slow_feedback)
        return REVISION

    def stopped(st: planner_pb2.SubTask, plan: planner_pb2.Plan) -> None:
        raise KeyboardInterrupt("stopped while coding")

    monkeypatch.setattr(two, "_new_plan", new_plan)
    monkeypatch.setattr(two, "_solve", stopped)
    with pytest.raises(KeyboardInterrupt):
        two._iterate()
    assert asked == ["The whole task after iteration 0: re-plan."]
    saved = RunState.load(two.ctx.run.dir)
    assert saved.slow_feedback == "" and [s["name"] for s in saved.plan["subtasks"]] == ["wood", "shelter"]
    resumed = TwoLoops(two.ctx.run, saved, two.ctx.describe, None, two.ctx.library, two.ctx.stubs, two.ctx.settings)
    monkeypatch.setattr(resumed, "_new_plan", new_plan)
    monkeypatch.setattr(resumed, "_solve", stopped)
    with pytest.raises(KeyboardInterrupt):
        resumed._iterate()
    assert len(asked) == 1  # the resumed iteration kept the adopted plan
