"""One agent (the paper's agent ablation, ``--agents one``): one LLM call plans the task, decides code or RL for
each sub-task and writes each sub-task's skill code or RL configuration, in one prompt and one answer.

:class:`OneAgent` renders one prompt (``prompts/one_agent*.txt``) from the helpers the slow and fast agents'
prompts use (the environment line, Describe's skill API with the world's rules, the evaluation protocol, the reward
kinds, the skill library) and asks for one answer: the slow agent's plan where each sub-task also carries ``code``
(decision "code") or ``rl`` (decision "rl"); for small models (skill programs) a ``program`` instead of ``code``,
with closed names (:mod:`services.planner.agents.one_schema`). The loops then run that plan as they run the slow
agent's; where they ask the fast agent for an answer, :meth:`OneAgent.fast` hands them the one written here
(:class:`~services.planner.agents.one_answers.WrittenAnswers`: tested, registered and converted as the fast
agent's answers are, with no LLM call). The call is recorded once (by whoever calls :meth:`OneAgent.solve`); the
answers handed on carry no record (``record`` None).
"""

from __future__ import annotations

import json
from typing import Any, get_args

from pydantic import BaseModel

from rlgpt.llm.client import CallRecord
from rlgpt.prompts import CompletesJSON
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, planner_pb2
from services.planner.agents.answers import AnswerHandler
from services.planner.agents.one_answers import AGENT, AnsweredPlan, WrittenAnswers
from services.planner.agents.one_schema import one_program_models, one_schema
from services.planner.agents.texts import (
    MAX_SHOWN_CODE,
    describe_env,
    library_text,
    offered_skills,
    reward_kinds_text,
    rules_text,
    skill_api_text,
    task_text,
)
from services.planner.answer_forms import condition_answer, plan_to_proto
from services.planner.plans import ending_in_goal, task_subtask
from services.planner.program_code import compile_program
from services.planner.program_writer import steps_text
from services.planner.programs import Vocabulary, check_program, program_schema, program_steps
from services.planner.prompts import EvalProtocol, game_text, idle_and_moves, inventory_text, render
from services.planner.schemas import MAX_SUBTASKS, plan_schema, rl_schema
from services.planner.skill_library import SkillLibrary
from services.planner.state import Decision

_FAST_REVISES = "A sub-task that fails is revised by the fast agent, then by you."
_ONE_REVISES = "A sub-task that fails is revised by you, in your next answer (with how it did)."
_START_ANY = (f"holding: {inventory_text([])}",
              "holding: what the sub-tasks before it leave")
_CODE_WHEN = (
    '- "code": a short {what} using the agent API can do it reliably (for example walking to the nearest\n'
    '  cell of a material that has been seen, using an action on it, placing or making something). Write the\n'
    '  {what} in the sub-task\'s "{field}".\n')
_RL_WHEN = (
    '- "rl": it needs reactive low-level control that is hard to code (for example keeping away from creatures,\n'
    '  fighting, hitting a moving creature, searching terrain nothing is known about). Write its reinforcement-\n'
    '  learning configuration in the sub-task\'s "rl"; library skills its policy may call as macro actions go\n'
    '  in the "rl" "skills" (the sub-task\'s own "skills" may stay []).')
_DECISIONS = _CODE_WHEN.format(what="Python skill", field="code") + _RL_WHEN
_CODE_ONLY = (
    '- "code" only: this run trains no policies. Write every sub-task\'s skill, a short Python generator using\n'
    '  the agent API, in its "code" (leave out the "rl" parts of the form below).')
_PROGRAM_DECISIONS = _CODE_WHEN.format(what="skill program", field="program").replace(" using the agent API", "") \
    + _RL_WHEN
_PROGRAM_ONLY = ('- "code" only: this run trains no policies. Write every sub-task\'s skill program in its "program"\n'
                 '  (decision "code" for every sub-task).')


class OneAgent:
    """Plans, codes and configures in one prompt and one answer; :meth:`fast` hands the answers to the loops."""

    def __init__(self, llm: CompletesJSON, env: env_pb2_grpc.EnvServiceStub, describe: env_pb2.DescribeResponse,
                 library: SkillLibrary, *, seed: int = 0, protocol: EvalProtocol | None = None,
                 allow_rl: bool = True, skill_format: str = "python"):
        """``allow_rl``: whether sub-tasks may be learned (False: mode pure-code, or no learner), as the loops
        decide the appended goal's decision. ``skill_format``: ``python`` (a coded sub-task's ``code``) or
        ``program`` (its skill program, compiled as the fast agent's are; closed names: for small models)."""
        if skill_format not in ("python", "program"):
            raise ValueError(f"skill_format must be python or program, not {skill_format!r}")
        self.programs = skill_format == "program"
        self.llm = llm
        self.describe = describe
        self.library = library
        self.protocol = (protocol or EvalProtocol()).with_rules(describe.rules)
        self.allow_rl = allow_rl
        self._written = WrittenAnswers(AnswerHandler(env, describe, library, self.protocol, seed=seed))

    @property
    def answered(self) -> AnsweredPlan | None:
        """The answers of the last solve (or restore), by the names the plan's sub-tasks have."""
        return self._written.answered

    # --- the prompt and the call -------------------------------------------------------------------
    def _previous(self, previous: AnsweredPlan | planner_pb2.Plan | None) -> AnsweredPlan | None:
        if previous is None or isinstance(previous, AnsweredPlan):
            return previous
        mine = self.answered  # a bare plan: the answers this agent wrote for it
        return AnsweredPlan(previous, dict(mine.code) if mine else {}, dict(mine.rl) if mine else {})

    def prompt(self, task: common_pb2.TaskSpec, *, previous: AnsweredPlan | planner_pb2.Plan | None = None,
               feedback: str = "") -> tuple[str, type[BaseModel]]:
        """The prompt and the answer schema; both offer the same library skills. ``previous``: the last plan
        with its answers (a bare plan: with the answers this agent wrote); ``feedback``: how it did."""
        text = task_text(task)
        skills = offered_skills(self.library, text)
        names = tuple(s.name for s in skills)
        relevant = tuple(s.name for s in self.library.retrieve(text, k=MAX_SHOWN_CODE) if s.name in names)
        answered = self._previous(previous)
        protocol = self.protocol
        common = dict(
            max_subtasks=str(MAX_SUBTASKS), env=describe_env(self.describe),
            goal=json.dumps([condition_answer(c) for c in task.success]) if task.success else "(none given)",
            plan_protocol=protocol.plan_test().replace(_FAST_REVISES, _ONE_REVISES),
            code_protocol=protocol.code_test([]).replace(*_START_ANY),
            rl_protocol=protocol.rl_test([]).replace(*_START_ANY), reward_kinds=reward_kinds_text(self.describe),
            previous=answered.answer_text() if answered else "(none)", feedback=feedback or "(none)", task=text)
        if self.programs:
            prompt = render("one_agent_program", decisions=_PROGRAM_DECISIONS if self.allow_rl else _PROGRAM_ONLY,
                            steps=steps_text(), rules=rules_text(self.describe), library=library_text(skills),
                            **common)
            return prompt, one_schema(self.describe, names, allow_rl=self.allow_rl, programs_for=task,
                                      feedback=feedback)
        prompt = render("one_agent", decisions=_DECISIONS if self.allow_rl else _CODE_ONLY,
                        skill_api=skill_api_text(self.describe), library=library_text(skills, code_of=relevant),
                        game=game_text(self.describe), idle_and_moves=idle_and_moves(self.describe), **common)
        return prompt, one_schema(self.describe, names, allow_rl=self.allow_rl)

    def solve(self, task: common_pb2.TaskSpec, *, iteration: int = 0,
              previous: AnsweredPlan | planner_pb2.Plan | None = None,
              feedback: str = "") -> tuple[planner_pb2.Plan, CallRecord]:
        """One call: the plan (ending in the task's goal) and, kept for :meth:`fast`, each sub-task's answer.

        An answer whose sub-task lacks the code or config its decision needs, or whose last sub-task does not
        have the task's success conditions, is refused with a message naming the sub-task (the client asks
        once more with it); a second bad answer raises StructuredOutputError with the failed call's record.
        """
        prompt, schema = self.prompt(task, previous=previous, feedback=feedback)

        def validate(answer: BaseModel) -> None:
            if self.programs:
                with_goal(answer, task)
            self._ends_in_goal(answer, task)
            self._check_programs(answer)

        answer, record = self.llm.complete(AGENT, [{"role": "user", "content": prompt}], schema,
                                           iteration=iteration, validate=validate)
        return self._adopt(answer, iteration), record

    def _check_programs(self, answer: BaseModel) -> None:
        """What a program's schema cannot say (:func:`check_program`), naming the sub-task and the step."""
        for st in answer.subtasks:  # type: ignore[attr-defined]
            if getattr(st, "program", None) is not None:
                try:
                    check_program(program_steps(st), self.describe.rules, list(self.describe.actions))
                except ValueError as exc:
                    raise ValueError(f"sub-task {st.name!r}: {exc}") from None

    def restore(self, parsed: dict[str, Any], iteration: int = 0) -> planner_pb2.Plan:
        """The plan of a recorded answer (``CallRecord.parsed``, e.g. of the run's last ``*-one.json`` record,
        see :func:`recorded_answer`), its answers served again: for a resumed run."""
        named = {s for st in parsed.get("subtasks", []) for s in [*st.get("skills", []),
                                                                   *(st.get("rl") or {}).get("skills", [])]}
        skills = tuple(sorted({s.name for s in self.library.all()} | named))
        # In program form the open-name plan: every name the answer used (a need the critic named too) stays valid.
        schema = one_program_models(plan_schema(self.describe, skills), rl_schema(self.describe, skills),
                                     program_schema(Vocabulary.of(self.describe)), self.allow_rl) \
            if self.programs else one_schema(self.describe, skills, allow_rl=self.allow_rl)
        return self._adopt(schema.model_validate(parsed), iteration)

    def _ends_in_goal(self, answer: BaseModel, task: common_pb2.TaskSpec) -> None:
        plan = plan_to_proto(answer, 0)
        length = len(plan.subtasks)
        if len(ending_in_goal(plan, task_subtask(task, Decision.CODE)).subtasks) > length:
            wanted = json.dumps([condition_answer(c) for c in task.success])
            raise ValueError(f"the last sub-task ({answer.subtasks[-1].name!r}) must have the task's own success "
                             f"conditions {wanted} among its \"success\": end the chain with the task itself")

    def _adopt(self, answer: BaseModel, iteration: int) -> planner_pb2.Plan:
        plan = plan_to_proto(answer, iteration)
        answered = AnsweredPlan(plan)
        # plan_to_proto keeps the order (and renames a repeated name): the answers go by the plan's names.
        for st, given in zip(plan.subtasks, answer.subtasks, strict=True):
            if getattr(given, "program", None) is not None:  # compiled as the fast agent's programs are
                answered.code[st.name] = compile_program(program_steps(given), self.describe, name=st.name,
                                                         success=list(st.success))
            elif getattr(given, "code", None):
                answered.code[st.name] = given.code
            if getattr(given, "rl", None) is not None:
                answered.rl[st.name] = given.rl.model_dump(mode="json")
        self._written.adopt(answered)
        return plan

    # --- the answers, handed to the loops ---------------------------------------------------------------
    def fast(self) -> WrittenAnswers:
        """What the loops call where they call the fast agent (Attempts(ctx, one.fast()))."""
        return self._written


def with_goal(answer: BaseModel, task: common_pb2.TaskSpec) -> None:
    """A small model's slip corrected, not refused: a last sub-task named after the task's achievement gets the
    task's own success conditions where it lacks them (Gemma 3 270M wrote the item the achievement gives, four
    times over); repeated conditions are dropped, and the task's come first within the schema's limit."""
    last = answer.subtasks[-1]  # type: ignore[attr-defined]
    if last.name not in {c.achievement for c in task.success if c.achievement}:
        return
    [condition] = get_args(type(last).model_fields["success"].annotation)
    limit = next((m.max_length for m in type(last).model_fields["success"].metadata
                  if getattr(m, "max_length", None)), len(task.success) + len(last.success))
    seen: dict[str, Any] = {}
    for given in [*(condition.model_validate(condition_answer(c)) for c in task.success), *last.success]:
        seen.setdefault(given.model_dump_json(), given)
    last.success = list(seen.values())[:limit]
