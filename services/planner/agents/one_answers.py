"""The one agent's answers: its plan with each sub-task's skill code or RL config (:class:`AnsweredPlan`), read
back from the run's record on resume (:func:`recorded_answer`), and handed to the loops where they ask the fast
agent for an answer (:class:`WrittenAnswers`: the answer handling called directly, with no LLM call)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from pydantic import BaseModel, ValidationError

from rlgpt.llm.client import StructuredOutputError
from rlgpt.v1 import common_pb2, learner_pb2, planner_pb2
from services.planner.agents.answers import AnswerHandler, MacroActions, RLAnswer, SkillCandidate
from services.planner.agents.texts import offered_skills, subtask_query
from services.planner.answer_forms import plan_answer, rl_config_answer
from services.planner.program_code import program_of
from services.planner.schemas import MacroActionAnswer, SkillAnswer, rl_schema
from services.planner.state import RunState

AGENT = "one"
"""The agent's name in LLM records and metrics."""


@dataclasses.dataclass
class AnsweredPlan:
    """A plan with the answers of its sub-tasks, by sub-task name: skill code, and RL configs in the answer's
    form (the fields of :func:`rl_schema`)."""

    plan: planner_pb2.Plan
    code: dict[str, str] = dataclasses.field(default_factory=dict)
    rl: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_state(cls, plan: planner_pb2.Plan, state: RunState) -> AnsweredPlan:
        """What the run tested for each sub-task of ``plan``: its last skill code and the RL config it last
        trained (with the skills and actions the loops joined)."""
        answered = cls(plan)
        for st in plan.subtasks:
            sub = state.subtasks.get(st.name)
            if sub is None:
                continue
            if sub.skill_code:
                answered.code[st.name] = sub.skill_code
            if sub.rl_config:
                config = json_format.ParseDict(sub.rl_config, learner_pb2.RLConfig(), ignore_unknown_fields=True)
                macros = getattr(sub, "macro_actions", None)
                answered.rl[st.name] = rl_config_answer(config, macros) if macros else rl_config_answer(config)
        return answered

    def answer_text(self) -> str:
        """The plan in the one agent's answer form (RL configs inline), then each sub-task's code."""
        doc = plan_answer(self.plan)
        for st in doc["subtasks"]:
            if st["name"] in self.rl:
                st["rl"] = self.rl[st["name"]]
        lines = [json.dumps(doc)]
        for st in self.plan.subtasks:
            if not self.code.get(st.name):
                continue
            if (steps := program_of(self.code[st.name])) is not None:  # a compiled program: shown as written
                lines.append(f'"program" of {st.name}: {json.dumps(steps)}')
                continue
            lines.append(f'"code" of {st.name}:')
            lines += [f"    {line}" for line in self.code[st.name].rstrip().splitlines()]
        return "\n".join(lines)


def recorded_answer(run_dir: Path) -> dict[str, Any] | None:
    """The parsed answer of the run's last successful one-agent call (``llm/*-one.json``), for
    :meth:`~services.planner.agents.one.OneAgent.restore` on resume; None when there is none."""
    for path in sorted((run_dir / "llm").glob(f"*-{AGENT}.json"), reverse=True):
        try:
            parsed = json.loads(path.read_text()).get("parsed")
        except (OSError, ValueError):
            continue
        if parsed:
            return parsed
    return None


def _fitted(schema: type[BaseModel], written: dict[str, Any]) -> BaseModel:
    """A written answer as an answer of ``schema`` (the fast agent's own: what it would refuse is refused), or a
    StructuredOutputError (record None: the one agent's call was recorded when it was made)."""
    try:
        if schema is SkillAnswer and program_of(str(written.get("code", ""))) is not None:
            # A compiled program is the planner's code, not the model's: the limit on a model's code does not
            # apply (the env's does), as where the fast agent compiles one (program_writer.draw_program).
            return SkillAnswer.model_construct(**written)
        return schema.model_validate(written)
    except (ValidationError, ValueError) as exc:
        raise StructuredOutputError(f"{AGENT} agent: its answer does not fit {schema.__name__}: "
                                    f"{str(exc)[:500]}") from None


class WrittenAnswers:
    """Where the loops ask the fast agent for an answer, the one agent's answer written in its last solve, handled
    as the fast agent's answers are (:class:`~services.planner.agents.answers.AnswerHandler`), each served once.

    ``write_skill`` returns one candidate (the written code, tested with RunSkill and, when it works, registered
    under the sub-task's name and stored in the library) with ``record`` None. ``write_rl`` (and
    ``write_rl_config``) convert the written config as the fast agent's are, ``record`` None. A sub-task with no
    written answer (the loops appended it), or one already tried since the last solve: write_skill returns a
    candidate with no answer and the error, the RL writes raise StructuredOutputError with record None: the
    failures the loops already handle.
    """

    def __init__(self, answers: AnswerHandler):
        self.answers = answers
        self.answered: AnsweredPlan | None = None
        """The answers of the last solve (or restore), by the names the plan's sub-tasks have."""
        self._served: set[tuple[str, str]] = set()

    def adopt(self, answered: AnsweredPlan) -> None:
        """A new solve's answers: each may be served once again."""
        self.answered = answered
        self._served.clear()

    def take(self, subtask: planner_pb2.SubTask, kind: str) -> dict[str, Any]:
        """The written answer of ``kind`` for ``subtask`` in answer form ("code": SkillAnswer's fields, "rl": the RL
        answer's), served once per solve; StructuredOutputError (record None) where there is none."""
        written: dict[str, Any] | None = None
        if self.answered is not None and kind == "code" and self.answered.code.get(subtask.name):
            written = {"name": subtask.name, "description": subtask.description[:400],
                       "code": self.answered.code[subtask.name]}
        elif self.answered is not None and kind == "rl":
            written = self.answered.rl.get(subtask.name)
        if written is None:
            raise StructuredOutputError(
                f"{AGENT} agent: its answer has no {kind} for sub-task {subtask.name!r} (the plan did not carry "
                f"one, or the loops added the sub-task); it writes one when it revises the plan")
        if (subtask.name, kind) in self._served:
            raise StructuredOutputError(
                f"{AGENT} agent: the {kind} it wrote for {subtask.name!r} was tried already this iteration; it "
                "writes a new one when it revises the plan")
        self._served.add((subtask.name, kind))
        return written

    def write_skill(self, subtask: planner_pb2.SubTask, *, start_inventory: list[common_pb2.ItemCount] | None = None,
                    frames_per_episode: int = 0, **_: Any) -> list[SkillCandidate]:
        """One candidate, whatever number of candidates the loops ask for: the one agent wrote one skill per
        sub-task (the revision's context, ``previous_code`` and the like, went into its next solve)."""
        try:
            answer = _fitted(SkillAnswer, self.take(subtask, "code"))
        except StructuredOutputError as exc:
            return [SkillCandidate.unusable(0, exc)]
        tested = self.answers.test_skill(subtask, answer, 0, None, start_inventory,
                                         frames_per_episode=frames_per_episode)
        return self.answers.keep_best(subtask, [tested])

    def write_rl(self, subtask: planner_pb2.SubTask, *, env_frames: int,
                 start_inventory: list[common_pb2.ItemCount] | None = None, **_: Any) -> RLAnswer:
        """The written RL config, checked by the fast agent's schema for ``subtask`` (its offered skills)."""
        names = tuple(s.name for s in offered_skills(self.answers.library, subtask_query(subtask)))
        answer = _fitted(rl_schema(self.answers.describe, names), self.take(subtask, "rl"))
        return self.answers.rl_answer(subtask, answer, None, env_frames=env_frames, start_inventory=start_inventory)

    def write_rl_config(self, subtask: planner_pb2.SubTask, *, env_frames: int,
                        **more: Any) -> tuple[learner_pb2.RLConfig, None]:
        """The config of :meth:`write_rl` without its macro actions."""
        return self.write_rl(subtask, env_frames=env_frames, **more).config, None

    def register_macro_actions(self, subtask: planner_pb2.SubTask,
                               macros: list[MacroActionAnswer]) -> MacroActions:
        """The answer's macro actions registered (:meth:`AnswerHandler.register_macro_actions`)."""
        return self.answers.register_macro_actions(subtask, macros)
