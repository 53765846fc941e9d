"""The slow agent (task -> plan) and the fast agent (sub-task -> skill code or RL config)."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import Any

import grpc
from pydantic import BaseModel

from rlgpt import metrics
from rlgpt.llm.client import CallRecord, StructuredOutputError
from rlgpt.prompts import CompletesJSON, conditions_text
from rlgpt.reward_kinds import REWARD_KINDS
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, planner_pb2
from services.planner.prompts import EvalProtocol, render
from services.planner.schemas import (
    MAX_SUBTASKS,
    SkillAnswer,
    complete_action_space,
    plan_answer,
    plan_schema,
    plan_to_proto,
    rl_config_answer,
    rl_config_to_proto,
    rl_schema,
)
from services.planner.skill_library import LibrarySkill, SkillLibrary

log = logging.getLogger(__name__)
AGENTS = ("slow", "fast")  # the agents' names in LLM records and metrics


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


MAX_OFFERED_SKILLS = 16
"""Library skills offered to an agent (listed in its prompt and allowed by its schema: the same set)."""
MAX_SHOWN_CODE = 2
"""Library skills whose code the fast agent sees (the most relevant to its sub-task)."""
MAX_SHOWN_CODE_CHARS = 2500
"""A library skill's code is shown whole or not at all (cut code cannot be copied)."""


def describe_env(describe: env_pb2.DescribeResponse) -> str:
    return (f"backend {describe.backend}; actions: {', '.join(describe.actions)}\n"
            f"achievements: {', '.join(describe.achievements)}\nitems: {', '.join(describe.items)}")


def rules_text(describe: env_pb2.DescribeResponse) -> str:
    return describe.rules.text.strip() or "(the env server serves no rules for this backend)"


def skill_api_text(describe: env_pb2.DescribeResponse) -> str:
    """The skill API as Describe serves it; the rules appended when the server's text lacks them."""
    api = describe.skill_api.strip()
    if describe.rules.text and describe.rules.text.strip() not in api:
        api += "\n\nThe world's rules (generated from the game itself):\n" + describe.rules.text.strip()
    return api


def reward_kinds_text(describe: env_pb2.DescribeResponse) -> str:
    """The kinds the env server lists (Describe), each with what it pays (rlgpt.reward_kinds); a kind listed
    that rlgpt.reward_kinds does not describe is shown by name."""
    return "\n".join(f"- {kind}: {REWARD_KINDS[kind].doc}" if kind in REWARD_KINDS else f"- {kind}"
                      for kind in describe.reward_kinds) or "(none listed)"


def offered_skills(library: SkillLibrary, query: str, limit: int = MAX_OFFERED_SKILLS) -> list[LibrarySkill]:
    """The library skills an agent is offered, by name: every skill that passed its tests, or, past ``limit``,
    the ``limit`` most relevant to ``query`` (then the most successful). Prompt and schema use this one list."""
    working = [s for s in library.all() if s.success_rate > 0]
    if len(working) > limit:
        chosen = {s.name: s for s in library.retrieve(query, k=limit) if s.success_rate > 0}
        for s in sorted(working, key=lambda s: (-s.success_rate, s.name)):
            if len(chosen) >= limit:
                break
            chosen.setdefault(s.name, s)
        working = list(chosen.values())
    return sorted(working, key=lambda s: s.name)


def library_text(skills: list[LibrarySkill], code_of: tuple[str, ...] = ()) -> str:
    """One line per skill (name, description, tested success rate); the code of the skills in ``code_of``."""
    if not skills:
        return "(empty: no coded skill has passed its tests yet)"
    lines = []
    for s in skills:
        lines.append(f"- {s.name}: {s.description} (tested success {s.success_rate:.0%})")
        if s.name in code_of:
            if len(s.code) <= MAX_SHOWN_CODE_CHARS:
                lines.append("  code:\n" + "\n".join(f"    {line}" for line in s.code.rstrip().splitlines()))
            else:
                lines.append(f"  (code of {len(s.code)} characters, too long to show)")
    return "\n".join(lines)


class SlowAgent:
    """Decomposes a task into sub-tasks and decides code or RL for each."""

    def __init__(self, llm: CompletesJSON, describe: env_pb2.DescribeResponse, library: SkillLibrary,
                 protocol: EvalProtocol | None = None):
        self.llm = llm
        self.describe = describe
        self.library = library
        self.protocol = (protocol or EvalProtocol()).with_rules(describe.rules)

    def prompt(self, task: common_pb2.TaskSpec, previous: planner_pb2.Plan | None = None,
               feedback: str = "") -> tuple[str, type[BaseModel]]:
        """The prompt and the answer schema; both offer the same library skills."""
        task_text = task.description or task.name
        if task.success:
            task_text += f" (success: {conditions_text(list(task.success))})"
        skills = offered_skills(self.library, task_text)
        schema = plan_schema(self.describe, tuple(s.name for s in skills))
        prompt = render("slow_agent", env=describe_env(self.describe), rules=rules_text(self.describe),
                        protocol=self.protocol.plan_test(), max_subtasks=str(MAX_SUBTASKS),
                        library=library_text(skills),
                        previous_plan=json.dumps(plan_answer(previous)) if previous else "(none)",
                        feedback=feedback or "(none)", task=task_text)
        return prompt, schema

    def plan(self, task: common_pb2.TaskSpec, *, iteration: int = 0, previous: planner_pb2.Plan | None = None,
             feedback: str = "") -> tuple[planner_pb2.Plan, CallRecord]:
        prompt, schema = self.prompt(task, previous, feedback)
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
    frames: list[env_pb2.EpisodeFrames] = dataclasses.field(default_factory=list)
    """Sampled frames of each test episode, in the order of ``episodes`` (only where asked for)."""


class FastAgent:
    """Writes skills (tested on the env server) and RL configs (checked by the learner)."""

    def __init__(self, llm: CompletesJSON, env: env_pb2_grpc.EnvServiceStub, describe: env_pb2.DescribeResponse,
                 library: SkillLibrary, *, test_episodes: int | None = None, test_steps: int | None = None,
                 seed: int = 0, protocol: EvalProtocol | None = None):
        """``protocol``: the run's budgets (the loops pass theirs); without it, the planner's defaults with
        ``test_episodes``/``test_steps`` where given."""
        self.llm = llm
        self.env = env
        self.describe = describe
        self.library = library
        given = {k: v for k, v in (("test_episodes", test_episodes), ("test_steps", test_steps)) if v is not None}
        self.protocol = (protocol or EvalProtocol(**given)).with_rules(describe.rules)
        self.test_episodes = self.protocol.test_episodes
        self.test_steps = self.protocol.test_steps
        self.seed = seed

    def skill_prompt(self, subtask: planner_pb2.SubTask, *, previous_code: str = "", error: str = "",
                     feedback: str = "", start_inventory: list[common_pb2.ItemCount] | None = None) -> str:
        query = f"{subtask.name} {subtask.description} {conditions_text(list(subtask.success))}"
        skills = offered_skills(self.library, query)
        relevant = tuple(s.name for s in self.library.retrieve(query, k=MAX_SHOWN_CODE)
                         if s.name in {o.name for o in skills})
        return render("fast_agent_code", skill_api=skill_api_text(self.describe),
                      subtask=f"{subtask.name}: {subtask.description}",
                      success=conditions_text(list(subtask.success)),
                      protocol=self.protocol.code_test(list(start_inventory or [])),
                      library=library_text(skills, code_of=relevant), previous_code=previous_code or "(none)",
                      error=error or "(none)", feedback=feedback or "(none)")

    def rl_prompt(self, subtask: planner_pb2.SubTask, *, env_frames: int,
                  previous: learner_pb2.RLConfig | None = None, feedback: str = "",
                  start_inventory: list[common_pb2.ItemCount] | None = None) -> tuple[str, type[BaseModel]]:
        """The prompt and the answer schema; both offer the same library skills."""
        query = f"{subtask.name} {subtask.description} {conditions_text(list(subtask.success))}"
        skills = offered_skills(self.library, query)
        names = tuple(s.name for s in skills)
        suggested = [name for name in subtask.skills if name in names]
        prompt = render("fast_agent_rl", actions=", ".join(self.describe.actions),
                        skills=library_text(skills), suggested=", ".join(suggested) or "(none)",
                        reward_kinds=reward_kinds_text(self.describe),
                        subtask=f"{subtask.name}: {subtask.description}",
                        success=conditions_text(list(subtask.success)),
                        protocol=self.protocol.rl_test(list(start_inventory or []), env_frames),
                        rules=rules_text(self.describe),
                        previous_config=json.dumps(rl_config_answer(previous)) if previous else "(none)",
                        feedback=feedback or "(none)")
        return prompt, rl_schema(self.describe, names)

    def write_skill(self, subtask: planner_pb2.SubTask, *, iteration: int = 0, candidates: int = 1,
                    previous_code: str = "", error: str = "", feedback: str = "",
                    start_inventory: list[common_pb2.ItemCount] | None = None,
                    frames_per_episode: int = 0) -> list[SkillCandidate]:
        """Draws ``candidates`` skills, registers and tests each, returns them best first (Eureka-style).

        ``start_inventory``: what earlier sub-tasks of the chain produce, given at the start of each test.
        ``frames_per_episode``: PNG frames RunSkill samples from each test episode (for a critic that looks).
        """
        prompt = self.skill_prompt(subtask, previous_code=previous_code, error=error, feedback=feedback,
                                   start_inventory=start_inventory)
        results = []
        for index in range(candidates):
            try:
                answer, record = self.llm.complete("fast", [{"role": "user", "content": prompt}], SkillAnswer,
                                                   iteration=iteration)
            except StructuredOutputError as exc:
                # An unusable answer is a failed candidate; an unreachable LLM propagates and pauses the run.
                results.append(SkillCandidate(index, None, error=common_pb2.SkillError(
                    type=type(exc).__name__, message=str(exc)[:1000]), record=exc.record))
                continue
            results.append(self.test_skill(subtask, answer, index, record, start_inventory,
                                           frames_per_episode=frames_per_episode))
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
                   start_inventory: list[common_pb2.ItemCount] | None = None, *,
                   frames_per_episode: int = 0) -> SkillCandidate:
        """Registers the candidate under a private name and runs its test episodes."""
        name = f"{subtask.name}__candidate{index}"[:64]
        candidate = SkillCandidate(index, answer, record=record)
        try:
            self.env.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, description=answer.description,
                                                                code=answer.code, replace=True))
            result = self.env.RunSkill(env_pb2.RunSkillRequest(
                skill=name, episodes=self.test_episodes, max_steps=self.test_steps, seed=self.seed,
                task=common_pb2.TaskSpec(name=subtask.name, success=list(subtask.success),
                                         start_inventory=start_inventory or []),
                frames_per_episode=frames_per_episode))
        except grpc.RpcError as exc:
            # Refused by the sandbox (syntax, policy, never yields, ...): the message carries the line.
            candidate.error = common_pb2.SkillError(type=exc.code().name, message=exc.details() or "")
            return candidate
        candidate.success_rate = result.success_rate
        candidate.episodes = list(result.episodes)
        candidate.frames = list(result.frames)
        errors = [e.error for e in result.episodes if e.HasField("error")]
        if errors:
            candidate.error = errors[0]
        return candidate

    def write_rl_config(self, subtask: planner_pb2.SubTask, *, env_frames: int, iteration: int = 0,
                        previous: learner_pb2.RLConfig | None = None, feedback: str = "",
                        start_inventory: list[common_pb2.ItemCount] | None = None
                        ) -> tuple[learner_pb2.RLConfig, CallRecord]:
        """``previous``: the config the last attempt trained (shown to the model in its answer form)."""
        prompt, schema = self.rl_prompt(subtask, env_frames=env_frames, previous=previous, feedback=feedback,
                                        start_inventory=start_inventory)
        answer, record = self.llm.complete("fast", [{"role": "user", "content": prompt}], schema,
                                           iteration=iteration)
        config = rl_config_to_proto(answer, subtask, env_frames, self.seed)
        config.task.start_inventory.extend(start_inventory or [])
        added = complete_action_space(config, list(self.describe.actions), self.describe.rules)
        if added:
            log.info("RL config of %s: added the actions its success condition needs: %s", subtask.name, added)
        return config, record
