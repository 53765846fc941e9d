"""The chain controller's choice of a sub-task's policy, and an all-code chain's links measured from its episodes."""

from __future__ import annotations

from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.controller import chain_links, plan_links, policy_of
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


def three_links() -> planner_pb2.Plan:
    return planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name=name, success=[common_pb2.Condition(achievement=name)])
                                      for name in ("wood", "table", "pickaxe")])


def ran(steps: int, done: list[bool], frames: list[int] | None = None) -> common_pb2.EpisodeSummary:
    return common_pb2.EpisodeSummary(steps=steps, stages_done=done, stage_frames=frames or [])


def test_a_coded_chains_links_take_the_frames_between_their_stages() -> None:
    episodes = [ran(100, [True, True, True], [10, 30, 60]),  # wood 10, table 20, pickaxe 30
                ran(80, [True, False, False], [20, 0, 0]),  # wood 20, table to the end: 60
                ran(50, [False, False, False], [0, 0, 0]),  # wood to the end: 50
                ran(90, [True, True, False], [40, 5, 0])]  # table held before wood: 0 in table, pickaxe 50
    links = plan_links(three_links(), episodes)
    assert [(x["name"], x["reached"], x["succeeded"]) for x in links] == [("wood", 4, 3), ("table", 3, 2),
                                                                          ("pickaxe", 2, 1)]
    assert [x["mean_frames"] for x in links] == [(10 + 20 + 50 + 40) / 4, round((20 + 60 + 0) / 3, 1), (30 + 50) / 2]


def test_a_link_no_episode_reached_took_no_frames() -> None:
    links = plan_links(three_links(), [ran(50, [False, False, False], [0, 0, 0])])
    assert [x["mean_frames"] for x in links] == [50.0, 0.0, 0.0]


def test_an_older_env_server_says_reached_and_succeeded_but_not_the_frames() -> None:
    links = plan_links(three_links(), [ran(100, [True, True, True]), ran(80, [True, False, False])])
    assert [(x["reached"], x["succeeded"], x["mean_frames"]) for x in links] == [(2, 2, None), (2, 1, None),
                                                                                (1, 1, None)]
