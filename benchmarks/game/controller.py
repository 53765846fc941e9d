"""A finished RL-GPT run's final controller, read the way the planner recorded it: ``state.json``'s final evaluation
names it (``final.controller``) and the state holds what it is made of.

- ``code plan`` (``chain of coded skills``): the plan's coded skills in plan order, each until its sub-task's
  conditions hold: the env server's plan (the planner plays it with RunSkill's plan, the bench with the same plan
  action through the learner's evaluation loop, ``play_plan_alone``);
- ``chain`` (``chain: a (code) -> b (policy JOB)``): the learner's chain, its links built by the planner's own
  ``chain_links`` from the state;
- ``policy`` (a policy around the kept plan, or the game's policy with the plan's skills as macro actions): its
  job alone.

Every skill the controller runs comes with its code from the run directory, so that the raw results keep the code
they were scored with; a trained policy is named by its job and its checkpoint's SHA-256 (the learner's job
directory, ``--jobs``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from benchmarks.replay.records import run_id_of
from rlgpt.app.runner import recorded_request
from rlgpt.v1 import planner_pb2
from services.learner.policy import latest_checkpoint
from services.learner.sf_env import load_job_config
from services.planner.controller import CHAIN_CONTROLLER, chain_links, coded_skills
from services.planner.settings import PlannerSettings
from services.planner.state import RunState

CODE_PLAN, CHAIN, POLICY = "code plan", "chain", "policy"


@dataclasses.dataclass(frozen=True)
class FinalController:
    """What a run's final controller is made of, enough to play it on other worlds."""

    run_dir: Path
    """The run's directory (state.json, request.json, llm/)."""
    run_id: str
    """The run's id (status.json's; a kept record's recorded.json ``run_id``): the suffix of its skills' names."""
    seed: int
    """The run's seed: its worlds, and the held-out sets', derive from it (rlgpt/worlds.py)."""
    task: str
    """The task the run was made for (its controller is scored on the whole game whatever it was)."""
    kind: str
    """:data:`CODE_PLAN`, :data:`CHAIN` or :data:`POLICY`."""
    recorded: str
    """``final.controller`` as the planner wrote it."""
    skills: dict[str, str]
    """Every skill the controller runs: registered name -> code."""
    plan: tuple[tuple[str, tuple[dict[str, Any], ...]], ...] = ()
    """A code plan's steps: (registered skill, its sub-task's success conditions as JSON), in plan order."""
    links: tuple[dict[str, Any], ...] = ()
    """A chain's links (``ChainLink`` as JSON), in order."""
    job_id: str = ""
    """A policy's job."""
    job_dirs: dict[str, Path] = dataclasses.field(default_factory=dict)
    """Every job the controller runs -> its directory."""

    def as_json(self) -> dict[str, Any]:
        """The controller as the raw results keep it: its code, its links or plan, each policy's checkpoint."""
        checkpoints = {}
        for job, job_dir in sorted(self.job_dirs.items()):
            path = latest_checkpoint(job_dir)
            checkpoints[job] = {"checkpoint": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        return {"kind": self.kind, "recorded": self.recorded, "skills": dict(sorted(self.skills.items())),
                "plan": [{"skill": skill, "success": list(success)} for skill, success in self.plan],
                "links": list(self.links), "job_id": self.job_id, "checkpoints": checkpoints}


LINK = re.compile(r"(\S+) \((?:code|policy (\S+))\)")
"""A link of a recorded chain controller: its sub-task and, for a trained one, its policy's job."""


def chain_name(subtask: str, run_id: str) -> str:
    """The name the planner registers a chain's coded sub-task under (a job's action space may name it)."""
    return f"{subtask[:40]}__chain{run_id[-6:]}"


def skill_code(name: str, state: RunState, run_id: str) -> str | None:
    """The code of a skill a job's action space or plan names, from the run's state: an RL sub-task's macro action,
    a coded sub-task registered for the run's chain or kept plan (``<sub-task>__chain<id>``, ``__kept<id>``), or a
    sub-task's own name; None when the run does not hold it."""
    for sub in state.subtasks.values():
        if name in sub.macro_actions:
            return sub.macro_actions[name]
    match = re.fullmatch(r"(.+)__(?:chain|kept)([0-9A-Za-z]{1,6})", name)
    for sub in state.subtasks.values():
        if sub.skill_code and (sub.name == name or (match and match[2] == run_id[-6:] and sub.name[:40] == match[1])):
            return sub.skill_code
    return None


def job_skills(job_dirs: dict[str, Path], state: RunState, run_id: str) -> dict[str, str]:
    """Every skill the jobs' action spaces and kept plans name, with its code; ValueError for one the run lacks."""
    skills = {}
    for job, job_dir in job_dirs.items():
        config, _ = load_job_config(job_dir)
        for name in [*config.skills, *(step.skill for step in config.plan if step.skill)]:
            code = skill_code(name, state, run_id)
            if code is None:
                raise ValueError(f"job {job} names skill {name!r}, whose code the run directory does not hold")
            skills[name] = code
    return skills


def find_jobs(jobs: list[str], jobs_dir: Path) -> dict[str, Path]:
    """Each job's directory under ``jobs_dir`` (the learner's ``jobs`` folder); ValueError for one not there."""
    found = {job: jobs_dir / job for job in jobs}
    absent = [job for job, path in found.items() if not (path / "config.json").exists()]
    if absent:
        raise ValueError(f"job {absent[0]} is not in {jobs_dir} (the learner's job folder, --jobs): its checkpoint "
                         "is needed to play the run's policy")
    return found


def policy_job(state: RunState, recorded: str) -> str:
    """The job of a final controller that is one trained policy (around the kept plan, or the game's policy with
    macro actions), as the recorded controller names it; "" when it is a chain."""
    for record in (state.kept_plan or {}, getattr(state, "game_controller", None) or {}):
        job = str(record.get("job_id", ""))
        if job and f"policy {job}" in recorded and not recorded.startswith("chain"):
            return job
    return ""


def iteration_controller(run_dir: Path, iteration: int) -> FinalController:
    """The all-code chain an outer iteration evaluated, as its record keeps it (``IterationRecord.chain``), whether or
    not it was kept; ValueError when the record has none (an older run, or an iteration not evaluated) or a link
    of it is not coded."""
    state, request = RunState.load(run_dir), recorded_request(run_dir)
    records = [it for it in state.iterations if it.get("iteration") == iteration]
    chain = records[0].get("chain") if records else None
    if not chain or not chain.get("plan"):
        raise ValueError(f"{run_dir}: iteration {iteration} has no recorded chain (iterations recorded: "
                         f"{[it.get('iteration') for it in state.iterations if it.get('chain')]}); a run recorded "
                         "before iterations kept their chain can only play its final controller")
    plan, controllers = json_format.ParseDict(chain["plan"], planner_pb2.Plan()), chain.get("controllers", {})
    codes = [(st.name, str(controllers.get(st.name, {}).get("skill_code") or "")) for st in plan.subtasks]
    if missing := [name for name, code in codes if not code or controllers[name].get("decision") != "code"]:
        raise ValueError(f"{run_dir}: iteration {iteration}'s chain has links without code ({missing}); this bench "
                         "plays an iteration's all-code chain only")
    run_id = run_id_of(run_dir)
    return code_plan(plan, codes, run_dir=run_dir, run_id=run_id, seed=int(request.seed), task=request.task.name,
                     recorded=f"iteration {iteration}'s chain of coded skills")


def code_plan(plan: planner_pb2.Plan, codes: list[tuple[str, str]], **base: Any) -> FinalController:
    """An all-code chain as the env server's plan: each sub-task's code (``codes``: name, code in plan order) under
    its chain name, with its success conditions."""
    names = {name: chain_name(name, base["run_id"]) for name, _ in codes}
    return FinalController(kind=CODE_PLAN, skills={names[name]: code for name, code in codes}, plan=tuple(
        (names[st.name], tuple(json_format.MessageToDict(c, preserving_proto_field_name=True) for c in st.success))
        for st in plan.subtasks), **base)


def read_controller(run_dir: Path, jobs_dir: Path, plan_alone: bool = False) -> FinalController:
    """The run's final controller; ValueError when the run has none or the state no longer gives the recorded one.
    ``plan_alone``: a final policy around the kept plan is replaced by that plan alone (every link coded, no policy
    stepping in), as the kept plan's evaluation compares them."""
    state, request = RunState.load(run_dir), recorded_request(run_dir)
    if not state.final:
        raise ValueError(f"{run_dir}: the run has no final evaluation in its state.json (not finished): nothing to "
                         "score")
    recorded, run_id = str(state.final.get("controller", "")), run_id_of(run_dir)
    base = {"run_dir": run_dir, "run_id": run_id, "seed": int(request.seed), "task": request.task.name,
            "recorded": recorded}
    plan = state.plan_proto()
    job = policy_job(state, recorded)
    if plan_alone:
        if not job or job != (state.kept_plan or {}).get("job_id"):
            raise ValueError(f"{run_dir}: its final controller ({recorded!r}) is not a policy around the kept plan, "
                             "so there is no plan alone to play; drop --plan-alone")
        recorded = CHAIN_CONTROLLER
    elif job:
        jobs = find_jobs([job], jobs_dir)
        return FinalController(kind=POLICY, skills=job_skills(jobs, state, run_id), job_id=job, job_dirs=jobs,
                               **base)
    codes = coded_skills(plan, state)
    if recorded == CHAIN_CONTROLLER:
        if plan is None or len(codes) != len(plan.subtasks):
            raise ValueError(f"{run_dir}: recorded as an all-code chain, but a sub-task of its state's plan has no "
                             "code")
        return code_plan(plan, codes, **base)
    if not recorded.startswith("chain: "):
        raise ValueError(f"{run_dir}: its final controller ({recorded!r}) is none this bench can play")
    names = {name: chain_name(name, run_id) for name, _ in codes}
    links, _ = chain_links(plan, state, skill_frames=PlannerSettings().test_steps, skill_names=names)
    wanted = [(m[1], m[2] or "") for m in LINK.finditer(recorded.split(";")[0])]
    if [(link.name, link.job_id) for link in links] != wanted:
        raise ValueError(f"{run_dir}: its state gives the chain {[(link.name, link.job_id) for link in links]}, "
                         f"not the recorded final controller {recorded!r}")
    jobs = find_jobs([link.job_id for link in links if link.job_id], jobs_dir)
    skills = {names[name]: code for name, code in codes} | job_skills(jobs, state, run_id)
    return FinalController(kind=CHAIN, skills=skills, links=tuple(
        json_format.MessageToDict(link, preserving_proto_field_name=True) for link in links), job_dirs=jobs, **base)
