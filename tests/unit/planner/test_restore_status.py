"""The best controller restored after a worse revision brings back where each sub-task stood with it
(services/planner/task_review.py: restore): a link that had failed stays failed, with its success rate and feedback,
and the slow agent reads so; a best record written before statuses were recorded is done only where nothing changed."""

from __future__ import annotations

from pathlib import Path

from test_task_review import PLAN, coded_loops, record

from services.planner import task_review
from services.planner.plans import summary
from services.planner.state import Status


def test_a_link_that_failed_stays_failed_when_its_controller_comes_back(tmp_path: Path) -> None:
    ctx = coded_loops(tmp_path).ctx
    table = ctx.state.subtasks["table"]
    table.status, table.success_rate, table.feedback = Status.FAILED, 0.25, "It never finds a tree."
    task_review.keep_best(ctx, record(0, [True, True, False, False]))
    table.status, table.skill_code, table.success_rate, table.feedback = Status.DONE, "table-2", 1.0, "Passed."
    table.inner_iterations = 2
    decided = task_review.keep_best(ctx, record(1, [True, False, False, False]))
    assert decided.startswith("not better than iteration 0's")
    assert (table.skill_code, table.status, table.success_rate) == ("table-1", Status.FAILED, 0.25)
    assert (table.feedback, table.inner_iterations) == ("It never finds a tree.", 0)
    assert ctx.state.subtasks["wood"].status == Status.DONE
    assert "- table (code): failed, success 25%; It never finds a tree." in summary(PLAN, ctx.state)


def test_an_rl_link_below_its_bar_comes_back_failed_with_its_training(tmp_path: Path) -> None:
    ctx = coded_loops(tmp_path).ctx
    table = ctx.state.subtasks["table"]
    table.decision, table.job_id, table.status, table.success_rate = "rl", "job-1", Status.FAILED, 0.25
    table.rl_config, table.macro_actions = {"episode_length": 200}, {"table__turn": "def skill(agent): yield 'noop'"}
    table.tests.append({"iteration": 0, "kind": "rl", "job_id": "job-1", "success_rate": 0.25})
    task_review.keep_best(ctx, record(0, [True, True, False]))
    table.job_id, table.status, table.rl_config, table.macro_actions = "job-2", Status.DONE, {"episode_length": 90}, {}
    table.tests.append({"iteration": 1, "kind": "rl", "job_id": "job-2", "success_rate": 0.75})
    task_review.keep_best(ctx, record(1, [True, False, False]))
    assert (table.policy_job, table.job_id, table.status, table.success_rate) == ("job-1", "job-1", Status.FAILED, 0.25)
    assert table.rl_config == {"episode_length": 200} and list(table.macro_actions) == ["table__turn"]


def test_an_older_best_record_is_done_only_where_the_sub_task_still_runs_it_and_is_done(tmp_path: Path) -> None:
    ctx = coded_loops(tmp_path).ctx
    ctx.state.best = {"iteration": 0, "successes": [True, True, False], "plan": ctx.state.plan, "controllers": {
        name: {"decision": "code", "skill_code": f"{name}-1", "policy": ""} for name in ("wood", "table")}}
    ctx.state.subtasks["table"].skill_code = "table-2"  # revised since: whether table-1 passed is not recorded
    task_review.keep_best(ctx, record(1, [True, False, False]))
    assert ctx.state.subtasks["table"].skill_code == "table-1"
    assert ctx.state.subtasks["table"].status == Status.FAILED
    assert ctx.state.subtasks["wood"].status == Status.DONE  # untouched and done: its controller passed
    assert ctx.state.subtasks["wood"].success_rate == 1.0  # nothing recorded: what it had
