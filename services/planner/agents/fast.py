"""The fast agent: a sub-task -> skill code (or a skill program) or an RL config, one LLM call per answer.

Its prompts are ``prompts/fast_agent_*.txt``; what is done with its answers (tested, kept, converted, registered)
is :class:`~services.planner.agents.answers.AnswerHandler`'s."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from rlgpt import worlds
from rlgpt.llm.client import CallRecord, StructuredOutputError
from rlgpt.prompts import CompletesJSON, conditions_text
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, planner_pb2
from services.planner.agents.answers import AnswerHandler, MacroActions, RLAnswer, SkillCandidate
from services.planner.agents.texts import (
    MAX_SHOWN_CODE,
    choices_text,
    curve_text,
    frames_choice_text,
    last_shares,
    library_text,
    observable_text,
    offered_skills,
    reward_kinds_text,
    shown_macros,
    skill_api_text,
    subtask_query,
)
from services.planner.answer_forms import rl_config_answer
from services.planner.answer_limits import answer_limits
from services.planner.program_writer import draw_program, program_prompt
from services.planner.prompts import EvalProtocol, game_text, idle_and_moves, render
from services.planner.schemas import CODE_LIMIT, MacroActionAnswer, SkillAnswer, rl_schema
from services.planner.skill_library import SkillLibrary

AGENT = "fast"
"""The agent's name in LLM records and metrics."""


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
        self.describe = describe
        self.library = library
        given = {k: v for k, v in (("test_episodes", test_episodes), ("test_steps", test_steps)) if v is not None}
        self.protocol = (protocol or EvalProtocol(**given)).with_rules(describe.rules)
        self.seed = seed
        self.answers = AnswerHandler(env, describe, library, self.protocol, seed=seed)

    def skill_prompt(self, subtask: planner_pb2.SubTask, *, previous_code: str = "", error: str = "",
                     feedback: str = "", start_inventory: list[common_pb2.ItemCount] | None = None,
                     after: Sequence[str] = ()) -> str:
        query = subtask_query(subtask)
        skills = offered_skills(self.library, query)
        relevant = tuple(s.name for s in self.library.retrieve(query, k=MAX_SHOWN_CODE)
                         if s.name in {o.name for o in skills})
        return render("fast_agent_code", skill_api=skill_api_text(self.describe), game=game_text(self.describe),
                      subtask=f"{subtask.name}: {subtask.description}",
                      success=conditions_text(list(subtask.success)),
                      protocol=self.protocol.code_test(list(start_inventory or []), after),
                      library=library_text(skills, code_of=relevant), previous_code=previous_code or "(none)",
                      error=error or "(none)", feedback=feedback or "(none)",
                      answer_limits=answer_limits(SkillAnswer))

    def rl_prompt(self, subtask: planner_pb2.SubTask, *, env_frames: int,
                  previous: learner_pb2.RLConfig | None = None, feedback: str = "",
                  start_inventory: list[common_pb2.ItemCount] | None = None,
                  previous_macros: dict[str, str] | None = None,
                  curve: list[dict[str, Any]] | None = None, after: Sequence[str] = ()) -> tuple[str, type[BaseModel]]:
        """The prompt and the answer schema; both offer the same library skills.

        A revision shows ``previous`` (the config the last attempt trained) with its macro actions' code
        (``previous_macros``: registered name -> code), ``curve`` (the points of that training, see
        :func:`~services.planner.agents.texts.curve_text`) and ``feedback`` (the verdict)."""
        skills = offered_skills(self.library, subtask_query(subtask))
        names = tuple(s.name for s in skills)
        suggested = [name for name in subtask.skills if name in names]
        schema = rl_schema(self.describe, names)
        prompt = render("fast_agent_rl", actions=", ".join(self.describe.actions), code_limit=CODE_LIMIT,
                        answer_limits=answer_limits(schema),
                        game=game_text(self.describe), idle_and_moves=idle_and_moves(self.describe),
                        skills=library_text(skills), suggested=", ".join(suggested) or "(none)",
                        reward_kinds=reward_kinds_text(self.describe), observable=observable_text(self.describe),
                        subtask=f"{subtask.name}: {subtask.description}",
                        success=conditions_text(list(subtask.success)),
                        protocol=self.protocol.rl_test(list(start_inventory or []), env_frames, after),
                        frames_choice=frames_choice_text(env_frames),
                        skill_api=skill_api_text(self.describe),
                        previous_config=json.dumps(rl_config_answer(previous, shown_macros(previous_macros or {})))
                        if previous
                        else "(none)",
                        curve="\n".join(filter(None, (curve_text(list(curve or [])), choices_text(
                            last_shares(list(curve or [])), previous.name)))) if previous else "(none)",
                        feedback=feedback or "(none)")
        return prompt, schema

    def draw_skill(self, subtask: planner_pb2.SubTask, prompt: str, *, iteration: int = 0,
                   seed: int | None = None) -> tuple[SkillAnswer, CallRecord]:
        """One skill from the model (the LLM call): Python code, or a skill program compiled to it."""
        if self.skill_format == "program":
            answer, record, _ = draw_program(self.llm, self.describe, prompt, subtask, iteration=iteration,
                                              seed=seed)
            return answer, record
        return self.llm.complete(AGENT, [{"role": "user", "content": prompt}], SkillAnswer, iteration=iteration,
                                 seed=seed)

    def write_skill(self, subtask: planner_pb2.SubTask, *, iteration: int = 0, candidates: int = 1,
                    previous_code: str = "", error: str = "", feedback: str = "",
                    start_inventory: list[common_pb2.ItemCount] | None = None,
                    frames_per_episode: int = 0, prefix: Sequence[common_pb2.PrefixStep] = (),
                    after: Sequence[str] = (),
                    on_call: Callable[[CallRecord], None] | None = None) -> list[SkillCandidate]:
        """Draws ``candidates`` skills, registers and tests each, returns them best first (Eureka-style).

        ``start_inventory``: what earlier sub-tasks of the chain produce, given at the start of each test (no
        prefix). ``prefix``: the chain's earlier links, run first in every test episode (``after``: their
        sub-tasks' names, for the prompt).
        ``frames_per_episode``: PNG frames RunSkill samples from each test episode (for a critic that looks).
        ``on_call``: given each LLM call's record as soon as its answer is in, before the candidate is tested (a
        run records the call even when a service dies during the test); the candidates keep their records too.
        """
        if self.skill_format == "program":
            prompt = program_prompt(self.describe, self.protocol, subtask, previous_code=previous_code, error=error,
                                    feedback=feedback, start_inventory=start_inventory, after=after)
        else:
            prompt = self.skill_prompt(subtask, previous_code=previous_code, error=error, feedback=feedback,
                                       start_inventory=start_inventory, after=after)
        results = []
        for index in range(candidates):
            # Candidates of one prompt differ by their sampling seed (one draw: the server's own sampling).
            seed = worlds.candidate_seed(self.seed, index) if candidates > 1 else None
            try:
                answer, record = self.draw_skill(subtask, prompt, iteration=iteration, seed=seed)
            except StructuredOutputError as exc:
                # An unusable answer is a failed candidate; an unreachable LLM propagates and pauses the run.
                if on_call is not None and exc.record is not None:
                    on_call(exc.record)
                results.append(SkillCandidate.unusable(index, exc))
                continue
            if on_call is not None:
                on_call(record)
            results.append(self.answers.test_skill(subtask, answer, index, record, start_inventory,
                                                   frames_per_episode=frames_per_episode, prefix=prefix))
        return self.answers.keep_best(subtask, results)

    def write_rl(self, subtask: planner_pb2.SubTask, *, env_frames: int, iteration: int = 0,
                 previous: learner_pb2.RLConfig | None = None, feedback: str = "",
                 start_inventory: list[common_pb2.ItemCount] | None = None,
                 previous_macros: dict[str, str] | None = None,
                 curve: list[dict[str, Any]] | None = None, after: Sequence[str] = ()) -> RLAnswer:
        """The fast agent's RL answer: its config (``env_frames`` is the offer: the most it trains for) and its
        macro actions, not registered yet (:meth:`register_macro_actions`). ``previous``, ``previous_macros``,
        ``curve``, ``feedback``: what the last attempt trained and how it went (see :meth:`rl_prompt`); ``after``: the
        earlier sub-tasks whose skills run first in every episode (the chain's prefix)."""
        prompt, schema = self.rl_prompt(subtask, env_frames=env_frames, previous=previous, feedback=feedback,
                                        start_inventory=start_inventory, previous_macros=previous_macros,
                                        curve=curve, after=after)
        answer, record = self.llm.complete(AGENT, [{"role": "user", "content": prompt}], schema,
                                           iteration=iteration)
        return self.answers.rl_answer(subtask, answer, record, env_frames=env_frames,
                                      start_inventory=start_inventory)

    def write_rl_config(self, subtask: planner_pb2.SubTask, *, env_frames: int, iteration: int = 0,
                        previous: learner_pb2.RLConfig | None = None, feedback: str = "",
                        start_inventory: list[common_pb2.ItemCount] | None = None
                        ) -> tuple[learner_pb2.RLConfig, CallRecord | None]:
        """The config of :meth:`write_rl` without its macro actions (a caller that does not register them)."""
        answer = self.write_rl(subtask, env_frames=env_frames, iteration=iteration, previous=previous,
                               feedback=feedback, start_inventory=start_inventory)
        return answer.config, answer.record

    def register_macro_actions(self, subtask: planner_pb2.SubTask,
                               macros: list[MacroActionAnswer]) -> MacroActions:
        """The answer's macro actions registered (:meth:`AnswerHandler.register_macro_actions`)."""
        return self.answers.register_macro_actions(subtask, macros)
