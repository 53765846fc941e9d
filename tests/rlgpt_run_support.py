"""What the tests of whole `rlgpt run`s against a scripted LLM (test double) share: the answers of a one-subtask
run that gets wood by code and the small budget such a run gets; the run of a coded and two RL sub-tasks that
test_rlgpt_run and test_rlgpt_method both read; the services of a remote planner with its first run recorded,
which test_rlgpt_run_remote and test_rlgpt_replay both read (the fixtures are in tests/integration/conftest.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.app.runner import RunOptions, local_services, run_rlgpt
from services.env_server.skills.reference import COLLECT_WOOD

PLAN = {"rationale": "wood by code", "subtasks": [
    {"name": "get_wood", "description": "collect wood", "success": [{"achievement": "collect_wood"}],
     "decision": "code", "skills": []}]}
VERDICT = {"success": True, "diagnosis": "scripted critic", "suggestion": "keep", "target": "keep"}
WOOD_ANSWERS: dict[str, Any] = {
    "Plan": PLAN, "SkillAnswer": {"name": "get_wood", "description": "chop", "code": COLLECT_WOOD},
    "CriticAnswer": VERDICT}
"""The scripted answer to each response schema, by the schema's name."""
MACRO = "def skill(agent):\n    for _ in range(3):\n        yield 'do'\n"
RL = {"primitive_actions": ["noop", "do", "move_left", "move_right", "move_up", "move_down", "place_table",
                            "make_wood_pickaxe"],
      "skills": [], "skill_max_steps": 8, "reward_terms": [{"kind": "success", "target": "", "weight": 5}],
      "episode_length": 200}


def options(runs_dir: Path, **overrides: Any) -> RunOptions:
    """A one-iteration rl-gpt run of collect_wood under ``runs_dir`` (6000 frames, 2 eval episodes, seed 3)."""
    fields: dict[str, Any] = dict(
        task="collect_wood", success="", mode="rl-gpt", agents="slow-fast-critic", resume=None, runs_dir=runs_dir,
        outer=1, inner=1, frames_per_training=1000, total_frames=6000, eval_episodes=2, candidates=1, seed=3)
    fields.update(overrides)
    return RunOptions(**fields)


def subtask(name: str, decision: str, **condition: Any) -> dict[str, Any]:
    return {"name": name, "description": name.replace("_", " "), "success": [condition], "decision": decision,
            "skills": []}


def prompt_of(body: dict) -> str:
    return body["messages"][-1]["content"]


def schema_of(body: dict) -> str:
    return body["response_format"]["json_schema"]["name"]


def asked_subtask(body: dict) -> str:
    found = re.search(r"Sub-task: ([a-z_0-9]+)", prompt_of(body))
    return found.group(1) if found else ""


@dataclasses.dataclass
class MixedRun:
    """The finished run of get_wood by code, then table and pickaxe by RL (the table's with its macro action
    ``hit``): its report, its state, its runs directory and every prompt the critic was asked."""

    report: Path
    state: dict[str, Any]
    runs_dir: Path
    judged: list[str]

    def job_file(self, job_id: str) -> dict[str, Any]:
        """What the learner saved of ``job_id`` at its start: its RLConfig (``config``), its env servers."""
        return json.loads((self.runs_dir / "learner" / "jobs" / job_id / "config.json").read_text())

    def job_config(self, job_id: str) -> dict[str, Any]:
        """The RLConfig the learner saved for ``job_id``."""
        return self.job_file(job_id)["config"]


MIXED_PLAN = {"rationale": "wood by code, table and pickaxe by RL", "subtasks": [
    subtask("get_wood", "code", item="wood", count=3), subtask("table", "rl", achievement="place_table"),
    subtask("pickaxe", "rl", achievement="make_wood_pickaxe")]}


def run_mixed(runs_dir: Path) -> MixedRun:
    """make_wood_pickaxe (9000 frames, 1500 a training, two env servers) planned as ``MIXED_PLAN``; the critic
    always says the sub-task failed and the fast agent should go on."""
    judged: list[str] = []

    def reply(body: dict) -> Reply:
        name = schema_of(body)
        if name == "Plan":
            return Reply.json(MIXED_PLAN)
        if name == "SkillAnswer":
            return Reply.json({"name": "get_wood", "description": "chop", "code": COLLECT_WOOD})
        if name == "RLConfig":
            macros = [{"name": "hit", "description": "hit what is ahead three times", "code": MACRO}]
            return Reply.json({**RL, "macro_actions": macros if asked_subtask(body) == "table" else []})
        judged.append(prompt_of(body))
        return Reply.json({"success": False, "diagnosis": "scripted critic", "suggestion": "go on",
                           "target": "fast"})

    with FakeOpenAIServer([reply]) as llm, pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLGPT_LLM_BASE_URL", llm.base_url)
        mp.setenv("RLGPT_LLM_MODEL", "scripted")
        mp.setenv("RLGPT_CRITIC_LLM_ON_PASS", "true")  # every verdict's LLM call, passed ones too, is recorded
        mp.delenv("RLGPT_LEARNER_ENV_SERVERS", raising=False)
        report = run_rlgpt(options(runs_dir, task="make_wood_pickaxe", frames_per_training=1500, total_frames=9000,
                                   env_servers=2))
    return MixedRun(report, json.loads((report.parent / "state.json").read_text()), runs_dir, judged)


class Script:
    """Answers by schema like a model would; while ``failing``, every call after the plan fails (HTTP 500)."""

    def __init__(self) -> None:
        self.failing = False
        self.plans = 0

    def __call__(self, body: dict) -> Reply:
        name = schema_of(body)
        if name == "Plan":
            self.plans += 1
        elif self.failing:
            return Reply(status=500)
        return Reply.json(WOOD_ANSWERS[name])


@dataclasses.dataclass
class Cluster:
    """A planner's address, the folder of its runs, its LLM's script, and the report its first run (collect_wood
    by code, asked with ``options``) sent the client into the ``client`` runs directory."""

    target: str
    planner_runs: Path
    script: Script
    client: Path
    first_report: Path

    @property
    def first_run(self) -> Path:
        """The first run's directory on the planner's side: its state, its LLM record."""
        return self.planner_runs / self.first_report.parent.name


@contextlib.contextmanager
def serve_cluster(planner_side: Path, client: Path) -> Iterator[Cluster]:
    """The four services started apart from the client, their runs under ``planner_side``, the LLM test double
    answering ``WOOD_ANSWERS``; the first run asked into ``client`` before they are yielded."""
    script = Script()
    with FakeOpenAIServer([script]) as llm:
        service_env = {"RLGPT_LLM_BASE_URL": llm.base_url, "RLGPT_LLM_MODEL": "scripted",
                       "RLGPT_LLM_MAX_RETRIES": "1", "RLGPT_LLM_BACKOFF_SECONDS": "0.01",
                       "RLGPT_CRITIC_LLM_ON_PASS": "true"}  # the critic's calls on passed attempts are recorded too
        with local_services(options(planner_side / "runs"), planner_side / "logs", service_env) as services:
            target = services["planner"].target
            first = run_rlgpt(options(client, planner=target))
            yield Cluster(target, planner_side / "runs", script, client, first)
