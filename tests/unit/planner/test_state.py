"""A run's state.json: plans and sub-task progress survive a restart; a corrupt file is named, not ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgpt.errors import FailedPrecondition
from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.state import RunState, SubTaskState


def plan(*subtasks: tuple[str, int], iteration: int = 0) -> planner_pb2.Plan:
    return planner_pb2.Plan(iteration=iteration, rationale="r", subtasks=[
        planner_pb2.SubTask(name=name, decision=decision, success=[common_pb2.Condition(achievement="collect_wood")])
        for name, decision in subtasks])


def test_set_plan_keeps_every_plan_and_adds_sub_tasks_with_their_decision() -> None:
    state = RunState()
    assert state.plan_proto() is None
    first = plan(("wood", planner_pb2.DECISION_CODE), ("cow", planner_pb2.DECISION_RL))
    state.set_plan(first)
    assert state.plan_proto() == first
    assert {name: s.decision for name, s in state.subtasks.items()} == {"wood": "code", "cow": "rl"}
    assert all(s.status == "pending" for s in state.subtasks.values())
    second = plan(("wood", planner_pb2.DECISION_RL), iteration=1)
    state.set_plan(second)
    assert state.plan_proto() == second and len(state.plans) == 2 and state.plans[0]["subtasks"][1]["name"] == "cow"
    assert state.subtasks["wood"].decision == "rl"  # a sub-task not done yet follows the new plan


def test_a_done_sub_task_keeps_its_decision_and_work_on_a_replan() -> None:
    state = RunState()
    state.set_plan(plan(("wood", planner_pb2.DECISION_CODE)))
    state.subtasks["wood"].status = "done"
    state.subtasks["wood"].skill_code = "def skill(agent): yield 'do'"
    state.set_plan(plan(("wood", planner_pb2.DECISION_RL)))
    assert state.subtasks["wood"].decision == "code"
    assert state.subtasks["wood"].skill_code.startswith("def skill")


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    state = RunState(outer_iteration=2, frames_used=9000, slow_feedback="more wood", finished=True,
                     iterations=[{"tokens": 10.0, "seconds": 1.0, "frames": 5.0}], final={"success_rate": 0.5})
    state.set_plan(plan(("wood", planner_pb2.DECISION_RL)))
    wood = state.subtasks["wood"]
    wood.curve.append({"env_frames": 100.0, "success_rate": 0.2})
    wood.tests.append({"iteration": 0, "kind": "rl", "success_rate": 0.2})
    wood.rl_config = {"env_frames": "1000"}
    state.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temporary file left behind
    loaded = RunState.load(tmp_path)
    assert loaded == state
    assert isinstance(loaded.subtasks["wood"], SubTaskState)


def test_load_of_a_fresh_run_is_empty_state(tmp_path: Path) -> None:
    assert RunState.load(tmp_path) == RunState()


@pytest.mark.parametrize("text", ["{not json", json.dumps({"no_such_field": 1}),
                                  json.dumps({"subtasks": {"a": {"name": "a", "colour": "red"}}}), "[]", "null",
                                  json.dumps({"subtasks": []})])
def test_a_corrupt_state_file_is_failed_precondition_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / "state.json").write_text(text)
    with pytest.raises(FailedPrecondition, match=r"state\.json cannot be read") as info:
        RunState.load(tmp_path)
    assert "fix or remove that file" in str(info.value)


def test_a_state_written_before_macro_actions_loads_and_new_ones_round_trip(tmp_path: Path) -> None:
    old = {"outer_iteration": 1, "subtasks": {"cow": {
        "name": "cow", "status": "failed", "decision": "rl", "job_id": "j1", "feedback": "reward hitting cows",
        "curve": [{"env_frames": 500.0, "success_rate": 0.1, "mean_return": 0.2, "job_id": "j1", "iteration": 0}],
        "rl_config": {"name": "cow", "skills": ["chop"]}}}}
    (tmp_path / "state.json").write_text(json.dumps(old))
    loaded = RunState.load(tmp_path)
    assert loaded.subtasks["cow"].macro_actions == {} and loaded.subtasks["cow"].job_id == "j1"
    loaded.subtasks["cow"].macro_actions = {"cow__turn": "def skill(agent):\n    yield 'noop'\n"}
    loaded.save(tmp_path)
    assert RunState.load(tmp_path).subtasks["cow"].macro_actions == loaded.subtasks["cow"].macro_actions
