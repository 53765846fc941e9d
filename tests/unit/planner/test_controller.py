"""The chain controller's choice of a sub-task's policy."""

from __future__ import annotations

from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.controller import chain_links, policy_of
from services.planner.state import RunState, SubTaskState


def test_the_chain_runs_the_best_evaluated_policy_not_the_latest() -> None:
    sub = SubTaskState(name="pickaxe", decision="rl", job_id="j3", rl_config={"episode_length": 200}, tests=[
        {"iteration": 0, "kind": "rl", "job_id": "j1", "success_rate": 0.25},
        {"iteration": 0, "kind": "rl", "job_id": "j2", "success_rate": 0.625},
        {"iteration": 1, "kind": "rl", "job_id": "j3", "success_rate": 0.0}])
    assert policy_of(sub) == "j2"  # the revision trained worse: the better policy stays in the chain
    sub.tests.append({"iteration": 1, "kind": "rl", "job_id": "j4", "success_rate": 0.625})
    assert policy_of(sub) == "j4"  # the latest among equals
    sub.tests.append({"iteration": 1, "kind": "rl", "job_id": "j5", "success_rate": 0.9, "error": "job failed"})
    assert policy_of(sub) == "j4"  # a failed training is no policy
    assert policy_of(SubTaskState(name="x", decision="rl", job_id="j9")) == "j9"  # none evaluated yet
    plan = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="pickaxe", success=[
        common_pb2.Condition(achievement="make_wood_pickaxe")])])
    links, missing = chain_links(plan, RunState(subtasks={"pickaxe": sub}), skill_frames=300, skill_names={})
    assert [(link.job_id, link.max_frames) for link in links] == [("j4", 200)] and not missing
