"""bench-game reads a finished run's final controller as the planner recorded it: an all-code chain as the env
server's plan, a chain with policies as the learner's chain (its links from the planner's own chain_links), a kept
plan's policy alone; every skill with its code from the run, each policy's checkpoint hashed; and refuses a run it
cannot play as recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from benchmarks.game.controller import CHAIN, CODE_PLAN, POLICY, iteration_controller, read_controller
from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.state import Decision, RunState, Status, SubTaskState

RUNS = Path(__file__).resolve().parents[3] / "docs" / "runs"
WOOD = "def skill(agent):\n    yield 'do'\n"
MACRO = "def skill(agent):\n    yield 'noop'\n"


def test_an_all_code_chain_is_the_plan_of_its_coded_skills_in_plan_order() -> None:
    run = RUNS / "claude-relay-collect_diamond"
    controller = read_controller(run, Path("no-jobs"))
    state = json.loads((run / "state.json").read_text())
    names = [st["name"] for st in state["plan"]["subtasks"]]
    assert controller.kind == CODE_PLAN and controller.recorded == "chain of coded skills"
    assert [skill for skill, _ in controller.plan] == [f"{n}__chainiamond" for n in names]
    assert [controller.skills[skill] for skill, _ in controller.plan] == [
        state["subtasks"][n]["skill_code"] for n in names]
    assert controller.plan[1][1] == ({"achievement": "make_wood_pickaxe"},)
    assert controller.as_json()["checkpoints"] == {}


def make_run(tmp_path: Path, recorded: str, kept_job: str = "") -> tuple[Path, Path]:
    """A finished run of a coded sub-task and an RL one trained as job-1 (with a macro action), its final
    controller recorded as ``recorded``; and the learner's job folder holding job-1."""
    run, jobs = tmp_path / "wood__20261128-000000__abc123", tmp_path / "jobs"
    run.mkdir()
    (run / "request.json").write_text(json.dumps({"task": {"name": "crafter"}, "seed": "3"}))
    state = RunState()
    state.set_plan(planner_pb2.Plan(subtasks=[
        planner_pb2.SubTask(name="wood", decision=planner_pb2.DECISION_CODE,
                            success=[common_pb2.Condition(achievement="collect_wood")]),
        planner_pb2.SubTask(name="table", decision=planner_pb2.DECISION_RL,
                            success=[common_pb2.Condition(achievement="place_table")])]))
    state.subtasks["wood"] = SubTaskState(name="wood", status=Status.DONE, skill_code=WOOD)
    state.subtasks["table"] = SubTaskState(name="table", status=Status.DONE, decision=Decision.RL, job_id="job-1",
                                           rl_config={"episode_length": 500},
                                           macro_actions={"table__dig": MACRO})
    state.kept_plan = {"job_id": kept_job} if kept_job else None
    state.final = {"controller": recorded, "episodes": 8}
    state.save(run)
    for job, skills in (("job-1", ["table__dig"]), ("job-2", ["table__dig", "wood__keptabc123"])):
        checkpoints = jobs / job / "sf" / job / "checkpoint_p0"
        checkpoints.mkdir(parents=True)
        (checkpoints / "checkpoint_000000010_320.pth").write_bytes(job.encode())
        (jobs / job / "config.json").write_text(json.dumps({"config": {"skills": skills}}))
    return run, jobs


def test_a_chain_with_a_policy_is_the_learners_chain_with_every_skill_and_the_checkpoint(tmp_path: Path) -> None:
    run, jobs = make_run(tmp_path, "chain: wood (code) -> table (policy job-1)")
    controller = read_controller(run, jobs)
    assert controller.kind == CHAIN and controller.seed == 3 and controller.run_id == run.name
    assert [(link["name"], link.get("skill"), link.get("job_id"), link["max_frames"]) for link in controller.links] == [
        ("wood", "wood__chainabc123", None, 300), ("table", None, "job-1", 500)]
    assert controller.skills == {"wood__chainabc123": WOOD, "table__dig": MACRO}  # the policy's macro action too
    assert controller.as_json()["checkpoints"] == {"job-1": {"checkpoint": "checkpoint_000000010_320.pth",
                                                             "sha256": hashlib.sha256(b"job-1").hexdigest()}}


def test_a_kept_plans_policy_is_played_alone_with_the_skills_its_job_names(tmp_path: Path) -> None:
    run, jobs = make_run(tmp_path, "kept plan: the plan's chain with policy job-2 stepping in", kept_job="job-2")
    controller = read_controller(run, jobs)
    assert controller.kind == POLICY and controller.job_id == "job-2" and list(controller.job_dirs) == ["job-2"]
    assert controller.skills == {"table__dig": MACRO, "wood__keptabc123": WOOD}


def test_a_kept_plans_policy_gives_way_to_its_plan_alone_when_asked() -> None:
    run = RUNS / "claude-relay-collect_diamond-7"  # its final controller is the policy around the kept plan
    controller = read_controller(run, Path("no-jobs"), plan_alone=True)
    state = json.loads((run / "state.json").read_text())
    names = [st["name"] for st in state["plan"]["subtasks"]]
    assert controller.kind == CODE_PLAN and [skill for skill, _ in controller.plan] == [
        f"{n}__chain09c9bf" for n in names]
    assert [controller.skills[skill] for skill, _ in controller.plan] == [
        state["subtasks"][n]["skill_code"] for n in names]


def test_a_plan_alone_is_refused_for_a_controller_that_is_not_a_kept_plans_policy(tmp_path: Path) -> None:
    run, jobs = make_run(tmp_path, "chain: wood (code) -> table (policy job-1)")
    with pytest.raises(ValueError, match="not a policy around the kept plan, so there is no plan alone"):
        read_controller(run, jobs, plan_alone=True)


def test_an_iterations_chain_is_played_as_its_record_keeps_it_and_a_run_without_one_is_refused(
        tmp_path: Path) -> None:
    run, _ = make_run(tmp_path, "chain of coded skills")
    state = json.loads((run / "state.json").read_text())
    plan = {"subtasks": [{"name": "wood", "decision": "DECISION_CODE", "success": [{"achievement": "collect_wood"}]}]}
    state["iterations"] = [{"iteration": 0, "chain": {"plan": plan, "controllers": {
        "wood": {"decision": "code", "skill_code": MACRO}}}}, {"iteration": 1}]
    (run / "state.json").write_text(json.dumps(state))
    controller = iteration_controller(run, 0)
    assert controller.kind == CODE_PLAN and controller.recorded == "iteration 0's chain of coded skills"
    assert controller.plan == (("wood__chainabc123", ({"achievement": "collect_wood"},)),)
    assert controller.skills == {"wood__chainabc123": MACRO}  # the iteration's code, not the state's (WOOD)
    with pytest.raises(ValueError, match=r"iteration 1 has no recorded chain \(iterations recorded: \[0\]\)"):
        iteration_controller(run, 1)
    state["iterations"][0]["chain"]["controllers"]["wood"] = {"decision": "rl", "skill_code": ""}
    (run / "state.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match=r"links without code \(\['wood'\]\)"):
        iteration_controller(run, 0)


@pytest.mark.parametrize(("recorded", "jobs_dir", "message"), [
    ("chain: wood (code) -> table (policy job-9)", "jobs", "not the recorded final controller"),
    ("chain: wood (code) -> table (policy job-1)", "elsewhere", "job job-1 is not in"),
    ("none: no sub-task has a skill or a trained policy yet", "jobs", "none this bench can play"),
])
def test_a_controller_it_cannot_play_as_recorded_is_refused(tmp_path: Path, recorded: str, jobs_dir: str,
                                                            message: str) -> None:
    run, _ = make_run(tmp_path, recorded)
    with pytest.raises(ValueError, match=message):
        read_controller(run, tmp_path / jobs_dir)


def test_an_unfinished_run_and_a_skill_the_run_lacks_are_refused(tmp_path: Path) -> None:
    run, jobs = make_run(tmp_path, "chain: wood (code) -> table (policy job-1)")
    (jobs / "job-1" / "config.json").write_text(json.dumps({"config": {"skills": ["from_another_run"]}}))
    with pytest.raises(ValueError, match="job job-1 names skill 'from_another_run', whose code the run"):
        read_controller(run, jobs)
    state = json.loads((run / "state.json").read_text())
    (run / "state.json").write_text(json.dumps(state | {"final": None}))
    with pytest.raises(ValueError, match="no final evaluation"):
        read_controller(run, jobs)


def test_a_kept_record_names_its_skills_by_the_runs_own_id_not_its_folder(tmp_path: Path) -> None:
    run, jobs = make_run(tmp_path, "kept plan: the plan's chain with policy job-2 stepping in", kept_job="job-2")
    kept = run.rename(tmp_path / "kept-by-hand")  # docs/runs/NAME: its recorded.json keeps the run's id
    (kept / "recorded.json").write_text(json.dumps({"run_id": run.name, "model": "m"}))
    controller = read_controller(kept, jobs)
    assert controller.run_id == run.name and controller.skills["wood__keptabc123"] == WOOD


def test_the_kept_crafter_record_is_the_controller_its_held_out_scoring_played() -> None:
    run = RUNS / "claude-relay-crafter"
    raw = json.loads((RUNS.parent / "bench-raw" / "game" / run.name / "results.json").read_text())
    controller = read_controller(run, Path("no-jobs"))
    assert controller.run_id == raw["run"]["id"] == "crafter__20261129-000509__f52e84"
    assert controller.as_json() == raw["controller"]
