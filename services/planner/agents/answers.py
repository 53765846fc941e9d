"""What is done with an agent's answer, whoever wrote it (the fast agent's LLM call, or the one agent's answer
written earlier): a coded skill tested on the env server (RunSkill) and the best one kept (registered under its
sub-task's name and stored in the library), an RL answer converted to the learner's config (the actions and the
reward its success needs completed), and macro actions registered (RegisterSkill test-runs them)."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol

import grpc
from pydantic import BaseModel

from rlgpt import deadlines, worlds
from rlgpt.llm.client import CallRecord, StructuredOutputError
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, planner_pb2
from services.planner.action_space import complete_action_space, complete_reward
from services.planner.answer_forms import macro_actions_of, macro_skill_name, rl_config_to_proto
from services.planner.prompts import EvalProtocol
from services.planner.schemas import MacroActionAnswer, SkillAnswer
from services.planner.skill_library import LibrarySkill, SkillLibrary

log = logging.getLogger(__name__)
_LINE = re.compile(r"\bline (\d+)")


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

    @classmethod
    def unusable(cls, index: int, exc: StructuredOutputError) -> SkillCandidate:
        """A candidate whose answer was unusable: nothing to test, the error and the failed call's record."""
        return cls(index, None, error=common_pb2.SkillError(type=type(exc).__name__, message=str(exc)[:1000]),
                   record=exc.record)


@dataclasses.dataclass
class RLAnswer:
    """An RL answer: the learner's config (without the macro actions: they are registered first,
    :meth:`AnswerHandler.register_macro_actions`) and the macro actions it wrote."""

    config: learner_pb2.RLConfig
    macro_actions: list[MacroActionAnswer]
    record: CallRecord | None
    """The LLM call that wrote it; None where it was written in an earlier call (the one agent's)."""


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


def refusal_error(exc: grpc.RpcError, code: str) -> common_pb2.SkillError:
    """RegisterSkill's refusal as a SkillError: the line (and its source) read from the server's message."""
    message = exc.details() or ""
    found = _LINE.search(message)
    line = int(found.group(1)) if found else 0
    lines = code.splitlines()
    return common_pb2.SkillError(type=exc.code().name, message=message[:1000], line=line,
                                 code_line=lines[line - 1].strip()[:200] if 0 < line <= len(lines) else "")


class WritesAnswers(Protocol):
    """What the loops ask of the agent that answers for a sub-task: the fast agent
    (:class:`~services.planner.agents.fast.FastAgent`), or the one agent's written answers
    (:class:`~services.planner.agents.one_answers.WrittenAnswers`)."""

    def write_skill(self, subtask: planner_pb2.SubTask, *, iteration: int = 0, candidates: int = 1,
                    **context: Any) -> list[SkillCandidate]: ...

    def write_rl(self, subtask: planner_pb2.SubTask, *, env_frames: int, iteration: int = 0,
                 **context: Any) -> RLAnswer: ...

    def register_macro_actions(self, subtask: planner_pb2.SubTask,
                               macros: list[MacroActionAnswer]) -> MacroActions: ...


def prefix_frames(prefix: Sequence[common_pb2.PrefixStep]) -> int:
    """The most frames a test episode's prefix may take (each link at most its max_frames)."""
    return sum(step.max_frames for step in prefix)


class AnswerHandler:
    """Tests, keeps, converts and registers answers on the run's env server, library and protocol."""

    def __init__(self, env: env_pb2_grpc.EnvServiceStub, describe: env_pb2.DescribeResponse, library: SkillLibrary,
                 protocol: EvalProtocol, *, seed: int = 0):
        """``protocol``: the test budgets (its ``test_episodes`` and ``test_steps``); ``seed``: the test worlds'
        and the configs' seed."""
        self.env = env
        self.describe = describe
        self.library = library
        self.protocol = protocol
        self.seed = seed

    def test_skill(self, subtask: planner_pb2.SubTask, answer: SkillAnswer, index: int,
                   record: CallRecord | None = None,
                   start_inventory: list[common_pb2.ItemCount] | None = None, *,
                   frames_per_episode: int = 0, prefix: Sequence[common_pb2.PrefixStep] = ()) -> SkillCandidate:
        """Registers the candidate under a private name and runs its test episodes (behind ``prefix``: the chain's
        earlier links, run first in each)."""
        name = f"{subtask.name}__candidate{index}"[:64]
        candidate = SkillCandidate(index, answer, record=record)
        try:
            self.env.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, description=answer.description,
                                                                code=answer.code, replace=True))
            result = self.env.RunSkill(env_pb2.RunSkillRequest(
                skill=name, episodes=self.protocol.test_episodes, max_steps=self.protocol.test_steps,
                seed=worlds.skill_test_worlds(self.seed),
                task=common_pb2.TaskSpec(name=subtask.name, success=list(subtask.success),
                                         start_inventory=start_inventory or []),
                frames_per_episode=frames_per_episode, prefix=list(prefix)),
                timeout=deadlines.frames_seconds(self.protocol.test_episodes * (
                    self.protocol.test_steps + prefix_frames(prefix))))
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

    def keep_best(self, subtask: planner_pb2.SubTask, candidates: list[SkillCandidate]) -> list[SkillCandidate]:
        """The candidates best first; the best one, where it works, registered under the sub-task's name (ready
        for RL action spaces) and stored in the library."""
        ranked = sorted(candidates, key=lambda c: c.success_rate, reverse=True)
        best = ranked[0]
        if best.answer is not None and best.success_rate > 0:
            self.env.RegisterSkill(env_pb2.RegisterSkillRequest(
                name=subtask.name, description=best.answer.description, code=best.answer.code, replace=True))
            self.library.add(LibrarySkill(name=subtask.name, description=best.answer.description,
                                          code=best.answer.code, success_rate=best.success_rate, task=subtask.name))
        return ranked

    def rl_answer(self, subtask: planner_pb2.SubTask, answer: BaseModel, record: CallRecord | None, *,
                  env_frames: int, start_inventory: list[common_pb2.ItemCount] | None = None) -> RLAnswer:
        """An answer of :func:`~services.planner.schemas.rl_schema` as the learner's config (``env_frames``: the
        offer, the most it trains for), the actions and the reward its success needs completed, and its macro
        actions, not registered yet."""
        config = rl_config_to_proto(answer, subtask, env_frames, self.seed)
        config.task.start_inventory.extend(start_inventory or [])
        added = complete_action_space(config, self.describe)
        if added:
            log.info("RL config of %s: added the actions its success condition needs: %s", subtask.name, added)
        if rewarded := complete_reward(config):
            log.info("RL config of %s: reward %s", subtask.name, rewarded)
        return RLAnswer(config, macro_actions_of(answer), record)

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
