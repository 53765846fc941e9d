"""The slow agent (task -> plan) and the fast agent (sub-task -> skill code or RL config)."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from collections.abc import Sequence
from functools import partial
from typing import Any, TypeVar

import grpc
from pydantic import BaseModel

from rlgpt import metrics
from rlgpt.env_client import action_name
from rlgpt.llm.client import CallRecord, StructuredOutputError
from rlgpt.prompts import CompletesJSON, conditions_text
from rlgpt.reward_kinds import REWARD_KINDS, offered
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, planner_pb2
from services.planner.plan_rules import goal_conditions, needs_named
from services.planner.program_writer import draw_program, program_prompt
from services.planner.programs import Vocabulary
from services.planner.prompts import EvalProtocol, render
from services.planner.schemas import (
    CODE_LIMIT,
    MAX_SUBTASKS,
    MIN_ENV_FRAMES,
    MacroActionAnswer,
    SkillAnswer,
    complete_action_space,
    complete_reward,
    macro_actions_of,
    macro_short_name,
    macro_skill_name,
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

    @property
    def model(self) -> str:
        """The wrapped client's model name ("" when it has none)."""
        return str(getattr(self.llm, "model", "") or "")

    def complete(self, agent: str, messages: list[dict[str, str]], schema: type[Any], *, iteration: int = 0,
                 validate: Any = None, seed: int | None = None) -> tuple[Any, CallRecord]:
        start = time.perf_counter()
        try:
            return self.llm.complete(agent, messages, schema, iteration=iteration, validate=validate, seed=seed)
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
MAX_SHOWN_MACRO_CHARS = 5000
"""The previous config's macro actions' code shown to the fast agent, all together (each one whole, at most
MAX_SHOWN_CODE_CHARS, or not at all): the revision prompt stays within a small model's context."""
MAX_CURVE_POINTS = 6
"""Points of the last training's learning curve shown to the fast agent when it revises an RL config."""


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


def reward_kinds_text(describe: env_pb2.DescribeResponse, leave_out: tuple[str, ...] = ()) -> str:
    """The kinds the env server lists (Describe) that an agent's RL config can use (``offered``, less
    ``leave_out``), each with what it pays (rlgpt.reward_kinds); a kind listed that rlgpt.reward_kinds does not
    describe is shown by name."""
    return "\n".join(f"- {kind}: {REWARD_KINDS[kind].doc}" if kind in REWARD_KINDS else f"- {kind}"
                      for kind in offered(describe.reward_kinds) if kind not in leave_out) or "(none listed)"


def observable_text(describe: env_pb2.DescribeResponse) -> str:
    """The observation vector's groups and their entries, as Describe names them (for ``observe``), then what
    they hold as Describe says it."""
    vector = next((f for f in describe.observation if f.name == "vector"), None)
    by_group: dict[str, list[str]] = {}
    for label in vector.labels if vector is not None else ():
        group, _, _ = label.partition("/")
        by_group.setdefault(group, []).append(label)
    names = "; ".join(f"{group} ({', '.join(labels)})" for group, labels in by_group.items()) or "(none)"
    return f"{names}. What they hold: {vector.description}" if vector is not None and vector.description else names


T = TypeVar("T")


def evenly(points: Sequence[T], limit: int) -> list[T]:
    """At most ``limit`` of ``points``, in order, spread evenly over them: the first and the last included."""
    if len(points) <= limit:
        return list(points)
    if limit <= 1:
        return list(points[-1:]) if limit == 1 else []
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def curve_text(points: list[dict[str, Any]], limit: int = MAX_CURVE_POINTS) -> str:
    """A training's learning curve in a few lines (frames trained: success rate, mean return): ``limit`` points
    spread evenly over it (:func:`evenly`). ``points``: one training's, in order, each with ``training_frames``
    (frames of that training) or else ``env_frames``."""
    if not points:
        return "(none)"
    points = evenly(points, limit)
    return "\n".join(f"- {int(p.get('training_frames', p.get('env_frames', 0)))} frames: success "
                     f"{float(p.get('success_rate', 0)):.0%}, mean return {float(p.get('mean_return', 0)):.2f}"
                     for p in points)


def choices_text(shares: dict[str, float], config_name: str = "") -> str:
    """What a trained policy chose in its last training episodes (``shares``: action -> share of its decisions,
    ``JobProgress.action_shares``), each action by the name its answer used (:func:`action_name`): the plan, a
    primitive, a library skill, or a macro action by the name the model wrote (``config_name``: the config that
    registered it)."""
    if not shares:
        return ""
    named = partial(macro_short_name, config_name) if config_name else str
    chosen = ", ".join(f"{action_name(action, named)} {share:.0%}"
                       for action, share in sorted(shares.items(), key=lambda item: -item[1]))
    return ("What the policy chose in its last training episodes (share of its decisions; the plan or a macro "
            f"action is one decision however many frames it plays): {chosen}.")


def last_shares(points: list[dict[str, Any]]) -> dict[str, float]:
    """The action shares of a training's curve: its last point that has them (``Attempts._watch``)."""
    return next((p["action_shares"] for p in reversed(points) if p.get("action_shares")), {})


def shown_macros(macros: dict[str, str], each: int = MAX_SHOWN_CODE_CHARS,
                 total: int = MAX_SHOWN_MACRO_CHARS) -> dict[str, str]:
    """The previous config's macro actions as its prompt shows them: each code whole while it (at most ``each``
    characters) and those before it fit (``total``), else a note in its place."""
    shown, left = {}, total
    for name, code in macros.items():
        if len(code) <= min(each, left):
            shown[name] = code
            left -= len(code)
        else:
            shown[name] = f"(code of {len(code)} characters, too long to show: write it anew, shorter)"
    return shown


def frames_choice_text(offered: int) -> str:
    """What the RL answer's ``env_frames`` may be, for an offer of ``offered`` frames."""
    if offered <= MIN_ENV_FRAMES:
        return f"`env_frames`: leave it out; {offered} frames is the least a training gets."
    return (f"`env_frames` (optional): train for fewer frames than that, at least {MIN_ENV_FRAMES}; leave it out to "
            f"train for all {offered} (more is never given).")


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


def closed_plan_schema(describe: env_pb2.DescribeResponse, task: common_pb2.TaskSpec, skills: tuple[str, ...],
                       feedback: str = "") -> type[BaseModel]:
    """The plan schema with closed names: sub-task and condition names are enums of the goal's prerequisites by the
    rules and of the needs the critic's ``feedback`` names (for small models, which copy placeholders as names)."""
    goal = goal_conditions(task)
    vocabulary = Vocabulary.of(describe).narrowed(describe.rules, goal, list(describe.actions))
    # A goal's own names stay offered even where no rule covers it (a creature, sleeping), and so does a need the
    # critic named (drinking on a long task).
    names = {*vocabulary.achievements, *(c.achievement for c in goal if c.achievement),
             *needs_named(feedback, describe.achievements)}
    items = {*vocabulary.items, *(c.inventory.item for c in goal if c.WhichOneof("kind") == "inventory"),
             *needs_named(feedback, describe.items)}
    ordered = tuple(a for a in describe.achievements if a in names)  # Describe's order: see Vocabulary
    return plan_schema(describe, skills, achievements=ordered, names=ordered,
                       items=tuple(i for i in describe.items if i in items))


class SlowAgent:
    """Decomposes a task into sub-tasks and decides code or RL for each."""

    def __init__(self, llm: CompletesJSON, describe: env_pb2.DescribeResponse, library: SkillLibrary,
                 protocol: EvalProtocol | None = None, closed_names: bool = False):
        """``closed_names``: sub-task names and condition names are enums of the goal's prerequisites by the rules
        and the needs the critic's feedback names (for small models, which otherwise copy the answer form's
        placeholders as names)."""
        self.llm = llm
        self.describe = describe
        self.library = library
        self.protocol = (protocol or EvalProtocol()).with_rules(describe.rules)
        self.closed_names = closed_names

    def _schema(self, task: common_pb2.TaskSpec, skills: tuple[str, ...], feedback: str) -> type[BaseModel]:
        if not self.closed_names:
            return plan_schema(self.describe, skills)
        return closed_plan_schema(self.describe, task, skills, feedback)

    def prompt(self, task: common_pb2.TaskSpec, previous: planner_pb2.Plan | None = None,
               feedback: str = "") -> tuple[str, type[BaseModel]]:
        """The prompt and the answer schema; both offer the same library skills."""
        task_text = task.description or task.name
        if task.success:
            task_text += f" (success: {conditions_text(list(task.success))})"
        skills = offered_skills(self.library, task_text)
        schema = self._schema(task, tuple(s.name for s in skills), feedback)
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


@dataclasses.dataclass
class RLAnswer:
    """The fast agent's RL answer: the learner's config (without the macro actions: they are registered first,
    :meth:`FastAgent.register_macro_actions`) and the macro actions it wrote."""

    config: learner_pb2.RLConfig
    macro_actions: list[MacroActionAnswer]
    record: CallRecord


@dataclasses.dataclass
class MacroActions:
    """How registering an RL answer's macro actions went: per macro action, in the answer's order, its registered
    name, the answer, and the env server's refusal (with its line) or None where it was accepted."""

    outcomes: list[tuple[str, MacroActionAnswer, common_pb2.SkillError | None]] = \
        dataclasses.field(default_factory=list)

    @property
    def accepted(self) -> dict[str, str]:
        """Registered name -> code of the accepted macro actions."""
        return {name: macro.code for name, macro, error in self.outcomes if error is None}

    @property
    def refused(self) -> list[tuple[str, MacroActionAnswer, common_pb2.SkillError]]:
        return [(name, macro, error) for name, macro, error in self.outcomes if error is not None]

    def feedback(self) -> str:
        """The refusals in words, for the fast agent's next revision ("" when none was refused)."""
        return " ".join(f"Macro action {macro.name} was refused by its test run and left out of the action space: "
                        f"{error.message}" for _, macro, error in self.refused)


_LINE = re.compile(r"\bline (\d+)")


def refusal_error(exc: grpc.RpcError, code: str) -> common_pb2.SkillError:
    """RegisterSkill's refusal as a SkillError: the line (and its source) read from the server's message."""
    message = exc.details() or ""
    found = _LINE.search(message)
    line = int(found.group(1)) if found else 0
    lines = code.splitlines()
    return common_pb2.SkillError(type=exc.code().name, message=message[:1000], line=line,
                                 code_line=lines[line - 1].strip()[:200] if 0 < line <= len(lines) else "")


class FastAgent:
    """Writes skills (tested on the env server) and RL configs (checked by the learner)."""

    def __init__(self, llm: CompletesJSON, env: env_pb2_grpc.EnvServiceStub, describe: env_pb2.DescribeResponse,
                 library: SkillLibrary, *, test_episodes: int | None = None, test_steps: int | None = None,
                 seed: int = 0, protocol: EvalProtocol | None = None, skill_format: str = "python"):
        """``protocol``: the run's budgets (the loops pass theirs); without it, the planner's defaults with
        ``test_episodes``/``test_steps`` where given. ``skill_format``: ``python`` (skills as Python code) or
        ``program`` (skill programs, compiled to Python: :mod:`services.planner.program_writer`)."""
        if skill_format not in ("python", "program"):
            raise ValueError(f"skill_format must be python or program, not {skill_format!r}")
        self.skill_format = skill_format
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
                      error=error or "(none)", feedback=feedback or "(none)", code_limit=CODE_LIMIT)

    def rl_prompt(self, subtask: planner_pb2.SubTask, *, env_frames: int,
                  previous: learner_pb2.RLConfig | None = None, feedback: str = "",
                  start_inventory: list[common_pb2.ItemCount] | None = None,
                  previous_macros: dict[str, str] | None = None,
                  curve: list[dict[str, Any]] | None = None) -> tuple[str, type[BaseModel]]:
        """The prompt and the answer schema; both offer the same library skills.

        A revision shows ``previous`` (the config the last attempt trained) with its macro actions' code
        (``previous_macros``: registered name -> code), ``curve`` (the points of that training, see
        :func:`curve_text`) and ``feedback`` (the verdict)."""
        query = f"{subtask.name} {subtask.description} {conditions_text(list(subtask.success))}"
        skills = offered_skills(self.library, query)
        names = tuple(s.name for s in skills)
        suggested = [name for name in subtask.skills if name in names]
        prompt = render("fast_agent_rl", actions=", ".join(self.describe.actions), code_limit=CODE_LIMIT,
                        skills=library_text(skills), suggested=", ".join(suggested) or "(none)",
                        reward_kinds=reward_kinds_text(self.describe), observable=observable_text(self.describe),
                        subtask=f"{subtask.name}: {subtask.description}",
                        success=conditions_text(list(subtask.success)),
                        protocol=self.protocol.rl_test(list(start_inventory or []), env_frames),
                        frames_choice=frames_choice_text(env_frames),
                        skill_api=skill_api_text(self.describe),
                        previous_config=json.dumps(rl_config_answer(previous, shown_macros(previous_macros or {})))
                        if previous
                        else "(none)",
                        curve="\n".join(filter(None, (curve_text(list(curve or [])), choices_text(
                            last_shares(list(curve or [])), previous.name)))) if previous else "(none)",
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
        programs = self.skill_format == "program"
        if programs:
            prompt = program_prompt(self.describe, self.protocol, subtask, previous_code=previous_code, error=error,
                                    feedback=feedback, start_inventory=start_inventory)
        else:
            prompt = self.skill_prompt(subtask, previous_code=previous_code, error=error, feedback=feedback,
                                       start_inventory=start_inventory)
        results = []
        for index in range(candidates):
            # Candidates of one prompt differ by their sampling seed (one draw: the server's own sampling).
            seed = self.seed * 1000 + index if candidates > 1 else None
            try:
                if programs:
                    answer, record, _ = draw_program(self.llm, self.describe, prompt, subtask, iteration=iteration,
                                                      seed=seed)
                else:
                    answer, record = self.llm.complete("fast", [{"role": "user", "content": prompt}], SkillAnswer,
                                                       iteration=iteration, seed=seed)
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

    def write_rl(self, subtask: planner_pb2.SubTask, *, env_frames: int, iteration: int = 0,
                 previous: learner_pb2.RLConfig | None = None, feedback: str = "",
                 start_inventory: list[common_pb2.ItemCount] | None = None,
                 previous_macros: dict[str, str] | None = None,
                 curve: list[dict[str, Any]] | None = None) -> RLAnswer:
        """The fast agent's RL answer: its config (``env_frames`` is the offer: the most it trains for) and its
        macro actions, not registered yet (:meth:`register_macro_actions`). ``previous``, ``previous_macros``,
        ``curve``, ``feedback``: what the last attempt trained and how it went (see :meth:`rl_prompt`)."""
        prompt, schema = self.rl_prompt(subtask, env_frames=env_frames, previous=previous, feedback=feedback,
                                        start_inventory=start_inventory, previous_macros=previous_macros,
                                        curve=curve)
        answer, record = self.llm.complete("fast", [{"role": "user", "content": prompt}], schema,
                                           iteration=iteration)
        config = rl_config_to_proto(answer, subtask, env_frames, self.seed)
        config.task.start_inventory.extend(start_inventory or [])
        added = complete_action_space(config, list(self.describe.actions), self.describe.rules)
        if added:
            log.info("RL config of %s: added the actions its success condition needs: %s", subtask.name, added)
        if rewarded := complete_reward(config):
            log.info("RL config of %s: reward %s", subtask.name, rewarded)
        return RLAnswer(config, macro_actions_of(answer), record)

    def write_rl_config(self, subtask: planner_pb2.SubTask, *, env_frames: int, iteration: int = 0,
                        previous: learner_pb2.RLConfig | None = None, feedback: str = "",
                        start_inventory: list[common_pb2.ItemCount] | None = None
                        ) -> tuple[learner_pb2.RLConfig, CallRecord]:
        """The config of :meth:`write_rl` without its macro actions (a caller that does not register them)."""
        answer = self.write_rl(subtask, env_frames=env_frames, iteration=iteration, previous=previous,
                               feedback=feedback, start_inventory=start_inventory)
        return answer.config, answer.record

    def register_macro_actions(self, subtask: planner_pb2.SubTask,
                               macros: list[MacroActionAnswer]) -> MacroActions:
        """Registers each macro action under a name of its own sub-task (:func:`macro_skill_name`); RegisterSkill
        test-runs it and refuses code that crashes (its message names the line). An env server that is gone
        (UNAVAILABLE) propagates: the run pauses."""
        result = MacroActions()
        taken: set[str] = set()
        for macro in macros:
            name = macro_skill_name(subtask.name, macro.name, taken)
            taken.add(name)
            error = None
            try:
                self.env.RegisterSkill(env_pb2.RegisterSkillRequest(
                    name=name, code=macro.code, replace=True,
                    description=f"macro action of {subtask.name}: {macro.description}"[:300]))
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAVAILABLE:
                    raise
                error = refusal_error(exc, macro.code)
            result.outcomes.append((name, macro, error))
        return result
