"""A re-plan that gives a sub-task's name other success conditions starts that sub-task fresh; the same name and
conditions keep its work (services/planner/state.py: RunState.set_plan); a restored best controller brings its
work back under the conditions it met (services/planner/task_review.py: restore)."""

from __future__ import annotations

from pathlib import Path

from test_task_review import coded_loops, record

from rlgpt.v1 import common_pb2, planner_pb2
from services.planner import task_review
from services.planner.controller import chain_links
from services.planner.state import RunState, Status

WOOD = common_pb2.Condition(achievement="collect_wood")
THREE_WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))
TABLE = common_pb2.Condition(achievement="place_table")


def plan(*conditions: common_pb2.Condition, decision: int = planner_pb2.DECISION_RL) -> planner_pb2.Plan:
    return planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="wood", decision=decision, success=list(conditions))])


def worked(state: RunState) -> None:
    """``wood`` trained, passed and counted frames."""
    wood = state.subtasks["wood"]
    wood.status, wood.job_id, wood.success_rate, wood.frames, wood.skill_code = Status.DONE, "j1", 0.9, 5000, "c"
    wood.tests.append({"iteration": 0, "kind": "rl", "job_id": "j1", "success_rate": 0.9})


def test_a_name_reused_for_other_conditions_starts_fresh() -> None:
    state = RunState()
    state.set_plan(plan(WOOD))
    worked(state)
    state.set_plan(plan(THREE_WOOD, decision=planner_pb2.DECISION_CODE))
    wood = state.subtasks["wood"]
    assert (wood.status, wood.decision, wood.job_id, wood.skill_code) == (Status.PENDING, "code", "", "")
    assert (wood.success_rate, wood.tests, wood.frames) == (0.0, [], 0)


def test_the_same_name_and_conditions_keep_their_work_in_any_order_and_after_a_plan_without_them() -> None:
    state = RunState()
    state.set_plan(plan(WOOD, TABLE))
    worked(state)
    state.set_plan(planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="table", success=[TABLE])]))
    state.set_plan(plan(TABLE, WOOD, decision=planner_pb2.DECISION_CODE))
    wood = state.subtasks["wood"]
    assert (wood.status, wood.decision, wood.job_id, wood.tests[0]["job_id"]) == (Status.DONE, "rl", "j1", "j1")
    state.set_plan(planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="table", success=[TABLE])]))
    state.set_plan(plan(THREE_WOOD))  # the latest plan naming wood had other conditions
    assert state.subtasks["wood"].job_id == ""


def test_a_worse_plan_that_reused_a_name_gives_back_the_best_one_with_its_trained_link(tmp_path: Path) -> None:
    ctx = coded_loops(tmp_path).ctx
    best = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="wood", decision=planner_pb2.DECISION_RL,
                                                          success=[WOOD])])
    ctx.state.set_plan(best)
    wood = ctx.state.subtasks["wood"]
    wood.decision, wood.job_id, wood.rl_config = "rl", "j1", {"episode_length": 200}
    wood.tests.append({"iteration": 0, "kind": "rl", "job_id": "j1", "success_rate": 0.9})
    task_review.keep_best(ctx, record(0, [True, True, False]))
    ctx.state.set_plan(plan(THREE_WOOD))  # the re-plan: wood starts fresh, and does worse
    assert ctx.state.subtasks["wood"].job_id == ""
    task_review.keep_best(ctx, record(1, [True, False, False]))
    links, missing = chain_links(ctx.state.plan_proto(), ctx.state, skill_frames=300, skill_names={})
    assert [(link.job_id, link.max_frames) for link in links] == [("j1", 200)] and not missing
    ctx.state.set_plan(best)  # the best plan again: its conditions, the work restored for them, kept
    assert ctx.state.subtasks["wood"].job_id == "j1"
