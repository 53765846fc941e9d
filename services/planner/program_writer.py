"""The fast agent's skill programs: which answer format a run uses, the program prompt, and one drawn program
turned into an ordinary skill answer (compiled Python, which the fast agent registers and tests like code)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from rlgpt.llm.client import CallRecord
from rlgpt.llm.local_server import MODEL_ALIAS
from rlgpt.prompts import CompletesJSON, conditions_text, shorten
from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.agents.texts import rules_text
from services.planner.program_code import compile_program, program_of
from services.planner.programs import (
    IDLE_LIMIT,
    Vocabulary,
    check_program,
    program_schema,
    program_steps,
    programs_supported,
    step_text,
)
from services.planner.prompts import EvalProtocol, render
from services.planner.schemas import SkillAnswer

log = logging.getLogger(__name__)
SKILL_FORMATS = ("auto", "python", "program")
"""RLGPT_SKILL_FORMAT's values: ``python`` (the fast agent writes Python), ``program`` (a skill program),
``auto`` (a program for the embedded models, Python otherwise)."""
EMBEDDED_MODELS = (MODEL_ALIAS, "gemma3-270m", "smollm2")
"""Model names the embedded servers answer to (llama.cpp's alias, vLLM's served Gemma 3 270M) and the embedded
models' own names: ``auto`` writes programs for them."""


def resolve_skill_format(setting: str, model: str, describe: env_pb2.DescribeResponse) -> str:
    """``python`` or ``program`` for a run: the setting, with ``auto`` decided by the model; a program is only
    possible where the env's rules and skill API support one (not MineDojo's), else Python (logged)."""
    wanted = setting
    if setting == "auto":
        name = model.lower()
        wanted = "program" if any(name == m or name.startswith(m) for m in EMBEDDED_MODELS) else "python"
    if wanted == "program" and not programs_supported(describe):
        log.warning("skill programs need world rules and the map API (step_to, needs, ...), which the %s backend "
                    "does not serve; the fast agent writes Python", describe.backend or "default")
        return "python"
    return wanted


def steps_text() -> str:
    """What each step of a program does (the prompts of the fast agent and the one agent share it)."""
    return render("program_steps", idle_limit=str(IDLE_LIMIT)).rstrip()


def program_prompt(describe: env_pb2.DescribeResponse, protocol: EvalProtocol, subtask: planner_pb2.SubTask, *,
                   previous_code: str = "", error: str = "", feedback: str = "",
                   start_inventory: list[common_pb2.ItemCount] | None = None, after: Sequence[str] = ()) -> str:
    """The prompt of a program; a revision shows the previous program (read back from its compiled code).
    ``after``: the chain's earlier sub-tasks its tests start behind."""
    previous = program_of(previous_code) if previous_code else None
    return render("fast_agent_program", steps=steps_text(), rules=rules_text(describe),
                  subtask=f"{subtask.name}: {subtask.description}",
                  success=conditions_text(list(subtask.success)),
                  protocol=protocol.code_test(list(start_inventory or []), after),
                  previous_program=json.dumps(previous) if previous else "(none)",
                  error=error or "(none)", feedback=feedback or "(none)")


def draw_program(llm: CompletesJSON, describe: env_pb2.DescribeResponse, prompt: str,
                 subtask: planner_pb2.SubTask, *, iteration: int,
                 seed: int | None = None) -> tuple[SkillAnswer, CallRecord, list[dict[str, Any]]]:
    """One program from the model for ``subtask``, its names those of the
    sub-task's prerequisites by the rules (:meth:`Vocabulary.narrowed`); checked (a problem the schema cannot see
    goes back to the model once, in the client's repair turn, naming the step) and compiled: a skill answer whose
    code is the compiled program."""
    rules, actions = describe.rules, list(describe.actions)
    schema: type[BaseModel] = program_schema(Vocabulary.of(describe).narrowed(rules, list(subtask.success), actions))

    def validate(answer: BaseModel) -> None:
        check_program(program_steps(answer), rules, actions)

    kwargs: dict[str, Any] = {"iteration": iteration, "validate": validate}
    if seed is not None:
        kwargs["seed"] = seed
    answer, record = llm.complete("fast", [{"role": "user", "content": prompt}], schema, **kwargs)
    steps = program_steps(answer)
    description = ", then ".join(step_text(step) for step in steps)
    code = compile_program(steps, describe, name=subtask.name, success=list(subtask.success))
    # The compiled code is the planner's, not the model's: the limit on a model's code does not apply (the env's
    # max_code_bytes does); a checked program of MAX_STEPS steps compiles to about 9 KB.
    return SkillAnswer.model_construct(name=subtask.name, code=code,
                                       description=shorten(f"{subtask.description}: {description}", 400)), \
        record, steps
