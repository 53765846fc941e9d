"""The slow agent (task -> plan) and the fast agent (sub-task -> skill code or RL config)."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import Any, Protocol

import grpc
from google.protobuf import json_format
from pydantic import BaseModel

from rlgpt import metrics
from rlgpt.llm.client import CallRecord, StructuredOutputError
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, planner_pb2
from services.planner.prompts import render
from services.planner.schemas import (
    SkillAnswer,
    complete_action_space,
    plan_schema,
    plan_to_proto,
    rl_config_to_proto,
    rl_schema,
)
from services.planner.skill_library import LibrarySkill, SkillLibrary

log = logging.getLogger(__name__)
AGENTS = ("slow", "fast")  # the agents' names in LLM records and metrics


class CompletesJSON(Protocol):
    """What agents need from an LLM client (LLMClient, ReplayClient, or a scripted double)."""

    def complete(self, agent: str, messages: list[dict[str, str]], schema: type[Any], *, iteration: int = 0,
                 validate: Any = None) -> tuple[Any, CallRecord]: ...


class MeteredLLM:
    """Wraps an LLM client: every agent call is timed and every failed one counted (``rlgpt_planner_llm_*``)."""

    def __init__(self, llm: CompletesJSON):
        self.llm = llm
        for agent in AGENTS:
            # Every series exists at 0 from the start, so rate() and increase() see the first call too.
            metrics.PLANNER_LLM_SECONDS.labels(agent)
            for kind in ("prompt", "completion"):
                metrics.PLANNER_LLM_TOKENS.labels(agent, kind)

    def complete(self, agent: str, messages: list[dict[str, str]], schema: type[Any], *, iteration: int = 0,
                 validate: Any = None) -> tuple[Any, CallRecord]:
        start = time.perf_counter()
        try:
            return self.llm.complete(agent, messages, schema, iteration=iteration, validate=validate)
        except Exception as exc:
            metrics.PLANNER_LLM_ERRORS.labels(agent, type(exc).__name__).inc()
            raise
        finally:
            metrics.PLANNER_LLM_SECONDS.labels(agent).observe(time.perf_counter() - start)


def describe_env(describe: env_pb2.DescribeResponse) -> str:
    return (f"backend {describe.backend}; actions: {', '.join(describe.actions)}\n"
            f"achievements: {', '.join(describe.achievements)}\nitems: {', '.join(describe.items)}")


def conditions_text(conditions: list[common_pb2.Condition]) -> str:
    parts = []
    for c in conditions:
        if c.WhichOneof("kind") == "achievement":
            parts.append(f"achievement {c.achievement}")
        else:
            parts.append(f"at least {c.inventory.count} {c.inventory.item}")
    return " and ".join(parts) or "none"


def library_text(skills: list[LibrarySkill]) -> str:
    if not skills:
        return "(empty)"
    return "\n".join(f"- {s.name}: {s.description} (success {s.success_rate:.0%})" for s in skills)


class SlowAgent:
    """Decomposes a task into sub-tasks and decides code or RL for each."""

    def __init__(self, llm: CompletesJSON, describe: env_pb2.DescribeResponse, library: SkillLibrary):
        self.llm = llm
        self.describe = describe
        self.library = library

    def plan(self, task: common_pb2.TaskSpec, *, iteration: int = 0, previous: planner_pb2.Plan | None = None,
             feedback: str = "") -> tuple[planner_pb2.Plan, CallRecord]:
        task_text = task.description or task.name
        if task.success:
            task_text += f" (success: {conditions_text(list(task.success))})"
        relevant = self.library.retrieve(task_text, k=8)
        schema = plan_schema(self.describe, tuple(s.name for s in self.library.all()))
        prompt = render("slow_agent", env=describe_env(self.describe), library=library_text(relevant),
                        previous_plan=json_format.MessageToJson(previous) if previous else "(none)",
                        feedback=feedback or "(none)", task=task_text)
        answer, record = self.llm.complete("slow", [{"role": "user", "content": prompt}], schema, iteration=iteration)
        return plan_to_proto(answer, iteration), record


@dataclasses.dataclass
class SkillCandidate:
    """One coded skill the fast agent wrote, and how its test went."""

    index: int
    answer: SkillAnswer | None
    success_rate: float = -1.0
    error: common_pb2.SkillError | None = None
    episodes: list[common_pb2.EpisodeSummary] = dataclasses.field(default_factory=list)
    record: CallRecord | None = None


class FastAgent:
    """Writes skills (tested on the env server) and RL configs (checked by the learner)."""

    def __init__(self, llm: CompletesJSON, env: env_pb2_grpc.EnvServiceStub, describe: env_pb2.DescribeResponse,
                 library: SkillLibrary, *, test_episodes: int = 4, test_steps: int = 300, seed: int = 0):
        self.llm = llm
        self.env = env
        self.describe = describe
        self.library = library
        self.test_episodes = test_episodes
        self.test_steps = test_steps
        self.seed = seed

    def write_skill(self, subtask: planner_pb2.SubTask, *, iteration: int = 0, candidates: int = 1,
                    previous_code: str = "", error: str = "", feedback: str = "",
                    start_inventory: list[common_pb2.ItemCount] | None = None) -> list[SkillCandidate]:
        """Draws ``candidates`` skills, registers and tests each, returns them best first (Eureka-style).

        ``start_inventory``: what earlier sub-tasks of the chain produce, given at the start of each test.
        """
        prompt = render("fast_agent_code", skill_api=self.describe.skill_api,
                        subtask=f"{subtask.name}: {subtask.description}",
                        success=conditions_text(list(subtask.success)), previous_code=previous_code or "(none)",
                        error=error or "(none)", feedback=feedback or "(none)")
        results = []
        for index in range(candidates):
            try:
                answer, record = self.llm.complete("fast", [{"role": "user", "content": prompt}], SkillAnswer,
                                                   iteration=iteration)
            except StructuredOutputError as exc:
                # An unusable answer is a failed candidate; an unreachable LLM propagates and pauses the run.
                results.append(SkillCandidate(index, None, error=common_pb2.SkillError(
                    type=type(exc).__name__, message=str(exc)[:1000])))
                continue
            results.append(self.test_skill(subtask, answer, index, record, start_inventory))
        results.sort(key=lambda c: c.success_rate, reverse=True)
        best = results[0]
        if best.answer is not None and best.success_rate > 0:
            # The winner is registered under the sub-task's name, ready for RL action spaces.
            self.env.RegisterSkill(env_pb2.RegisterSkillRequest(
                name=subtask.name, description=best.answer.description, code=best.answer.code, replace=True))
            self.library.add(LibrarySkill(name=subtask.name, description=best.answer.description,
                                          code=best.answer.code, success_rate=best.success_rate, task=subtask.name))
        return results

    def test_skill(self, subtask: planner_pb2.SubTask, answer: SkillAnswer, index: int,
                   record: CallRecord | None = None,
                   start_inventory: list[common_pb2.ItemCount] | None = None) -> SkillCandidate:
        """Registers the candidate under a private name and runs its test episodes."""
        name = f"{subtask.name}__candidate{index}"[:64]
        candidate = SkillCandidate(index, answer, record=record)
        try:
            self.env.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, description=answer.description,
                                                                code=answer.code, replace=True))
            result = self.env.RunSkill(env_pb2.RunSkillRequest(
                skill=name, episodes=self.test_episodes, max_steps=self.test_steps, seed=self.seed,
                task=common_pb2.TaskSpec(name=subtask.name, success=list(subtask.success),
                                         start_inventory=start_inventory or [])))
        except grpc.RpcError as exc:
            # Refused by the sandbox (syntax, policy, never yields, ...): the message carries the line.
            candidate.error = common_pb2.SkillError(type=exc.code().name, message=exc.details() or "")
            return candidate
        candidate.success_rate = result.success_rate
        candidate.episodes = list(result.episodes)
        errors = [e.error for e in result.episodes if e.HasField("error")]
        if errors:
            candidate.error = errors[0]
        return candidate

    def write_rl_config(self, subtask: planner_pb2.SubTask, *, env_frames: int, iteration: int = 0,
                        previous: learner_pb2.RLConfig | None = None, feedback: str = ""
                        ) -> tuple[learner_pb2.RLConfig, CallRecord]:
        skills = tuple(s.name for s in self.library.all())
        prompt = render("fast_agent_rl", actions=", ".join(self.describe.actions),
                        skills=", ".join(skills) or "(none)", subtask=f"{subtask.name}: {subtask.description}",
                        success=conditions_text(list(subtask.success)),
                        previous_config=json_format.MessageToJson(previous) if previous else "(none)",
                        feedback=feedback or "(none)")
        answer, record = self.llm.complete("fast", [{"role": "user", "content": prompt}],
                                           rl_schema(self.describe, skills), iteration=iteration)
        config = rl_config_to_proto(answer, subtask, env_frames, self.seed)
        added = complete_action_space(config, list(self.describe.actions))
        if added:
            log.info("RL config of %s: added the actions its success condition needs: %s", subtask.name, added)
        return config, record


def answer_json(answer: BaseModel) -> str:
    return json.dumps(answer.model_dump(mode="json"))
