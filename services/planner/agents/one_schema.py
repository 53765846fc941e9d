"""The one agent's answer schemas (``--agents one``): the slow agent's plan whose sub-tasks also carry their answer,
Python ``code`` or an ``rl`` config; in program form (small models) closed names and a skill ``program`` per coded
sub-task, the decision picking which part a sub-task must carry."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, Field, create_model, model_validator

from rlgpt.v1 import common_pb2, env_pb2
from services.planner.agents.slow import closed_plan_schema
from services.planner.plan_rules import goal_conditions
from services.planner.programs import Vocabulary, program_schema
from services.planner.schemas import MAX_SUBTASKS, SkillAnswer, plan_schema, rl_schema


def _code_type() -> Any:
    """A sub-task's ``code``: SkillAnswer's code field (its limits and description), optional."""
    field = SkillAnswer.model_fields["code"]
    return Annotated[(str, *field.metadata)] | None, Field(default=None, description=field.description)


@lru_cache(maxsize=32)
def _one_models(plan: type[BaseModel], rl: type[BaseModel], allow_rl: bool) -> type[BaseModel]:
    """The one agent's answer: ``plan`` (schemas.plan_schema) whose sub-tasks also carry ``code`` and, with
    ``allow_rl``, ``rl`` (an answer of ``rl``, schemas.rl_schema); the one the decision needs is required."""
    [subtask] = get_args(plan.model_fields["subtasks"].annotation)

    def answer_for_decision(self: Any) -> Any:
        if self.decision == "code" and not self.code:
            raise ValueError(f'sub-task {self.name!r} has decision "code" but no "code": write its skill there')
        if self.decision == "rl" and getattr(self, "rl", None) is None:
            raise ValueError(f'sub-task {self.name!r} has decision "rl" but no "rl": write its RL configuration '
                             "there")
        return self

    fields: dict[str, Any] = {"code": _code_type()}
    if allow_rl:
        fields["rl"] = (rl | None, None)
    else:
        fields["decision"] = (Literal["code"], ...)
    one_subtask = create_model("SubTask", __base__=subtask, __validators__={
        "answer_for_decision": model_validator(mode="after")(answer_for_decision)}, **fields)
    return create_model("Plan", __base__=plan,
                        subtasks=(list[one_subtask], Field(min_length=1, max_length=MAX_SUBTASKS)))


PROGRAM_RL_FIELDS = ("primitive_actions", "skills", "skill_max_steps", "reward_terms", "episode_length")
"""The RL config fields of the one agent's program form (the rest keep the fast agent's defaults)."""


@lru_cache(maxsize=32)
def one_program_models(plan: type[BaseModel], rl: type[BaseModel], program: type[BaseModel],
                        allow_rl: bool) -> type[BaseModel]:
    """The one agent's answer in program form: each sub-task is either a coded one (decision "code", its
    ``program``: the steps of ``program``) or an RL one (decision "rl", its ``rl``), told apart by ``decision``,
    so a grammar-constrained model cannot leave out the part its decision needs."""
    [subtask] = get_args(plan.model_fields["subtasks"].annotation)
    steps = program.model_fields["steps"]
    coded = create_model("CodedSubTask", __base__=subtask, decision=(Literal["code"], ...),
                         program=(Annotated[(steps.annotation, *steps.metadata)], Field(description=(
                             "The skill program: steps that run in order."))))
    item: Any = coded
    if allow_rl:
        # The fields its prompt explains: no macro actions (Python code), observation or frame choices.
        kept = {name: (field.annotation, field) for name, field in rl.model_fields.items() if name in PROGRAM_RL_FIELDS}
        short = create_model("RLConfig", **kept)
        learned = create_model("LearnedSubTask", __base__=subtask, decision=(Literal["rl"], ...), rl=(short, ...))
        item = Annotated[Union[coded, learned], Field(discriminator="decision")]  # noqa: UP007 (runtime models)
    return create_model("Plan", __base__=plan, subtasks=(list[item], Field(min_length=1, max_length=MAX_SUBTASKS)))


def one_schema(describe: env_pb2.DescribeResponse, skills: tuple[str, ...], *,
               allow_rl: bool = True, programs_for: common_pb2.TaskSpec | None = None,
               feedback: str = "") -> type[BaseModel]:
    """The one agent's answer schema: the slow agent's plan, each sub-task with its ``code`` or ``rl``; names,
    conditions and RL fields are the enums and limits of :func:`plan_schema` and :func:`rl_schema`.

    ``programs_for``: the task, for the program form (small models): closed names (the slow agent's, see
    :func:`closed_plan_schema`, with ``feedback``'s needs) and a ``program`` per coded sub-task, its names the
    enums of the task's prerequisites by the rules."""
    rl = rl_schema(describe, skills)
    if programs_for is None:
        return _one_models(plan_schema(describe, skills), rl, allow_rl)
    vocabulary = Vocabulary.of(describe).narrowed(describe.rules, goal_conditions(programs_for),
                                                  list(describe.actions))
    return one_program_models(closed_plan_schema(describe, programs_for, skills, feedback), rl,
                               program_schema(vocabulary), allow_rl)
