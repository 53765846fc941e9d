"""The slow agent: a task -> a plan (sub-tasks, each to be coded or learned), one LLM call per plan.

Its prompt is ``prompts/slow_agent.txt``; the plan's answer schema is :func:`~services.planner.schemas.plan_schema`
(with closed names for small models: :func:`closed_plan_schema`)."""

from __future__ import annotations

import json

from pydantic import BaseModel

from rlgpt.llm.client import CallRecord
from rlgpt.prompts import CompletesJSON
from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.agents.texts import describe_env, library_text, offered_skills, rules_text, task_text
from services.planner.answer_forms import plan_answer, plan_to_proto
from services.planner.answer_limits import answer_limits
from services.planner.game_task import is_game
from services.planner.plan_rules import goal_conditions, needs_named
from services.planner.programs import Vocabulary
from services.planner.prompts import EvalProtocol, game_text, render
from services.planner.schemas import MAX_SUBTASKS, plan_schema
from services.planner.skill_library import SkillLibrary

AGENT = "slow"
"""The agent's name in LLM records and metrics."""
GOAL_OBJECTIVE = "The last sub-task's conditions must imply the task."
"""What the plan must reach, for a task with success conditions."""
GAME_OBJECTIVE = (
    "The task is the whole game, so plan a curriculum: the achievements from the list below that you judge "
    "reachable within one episode, in an order the rules allow (whatever an achievement needs, items, tools or a "
    "placed thing nearby, is got by an earlier sub-task). Give each achievement its own sub-task (its success "
    "condition that achievement, or an inventory threshold on the way to one), decided code or rl, and leave out "
    "those you judge out of reach. The measure is the score exp(mean(ln(1 + s_i))) - 1 over the success rates s_i "
    "(in percent, across the evaluation's episodes) of every achievement in the list, each counted once per "
    "episode: an achievement never unlocked weighs on it, so many achievements unlocked reliably score higher "
    "than a few hard ones.")
"""What the plan must reach for a task whose objective is the game itself (services/planner/game_task.py)."""


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
        text = task_text(task)
        skills = offered_skills(self.library, text)
        schema = self._schema(task, tuple(s.name for s in skills), feedback)
        prompt = render("slow_agent", env=describe_env(self.describe), rules=rules_text(self.describe),
                        game=game_text(self.describe),
                        protocol=self.protocol.plan_test(), max_subtasks=str(MAX_SUBTASKS),
                        library=library_text(skills),
                        previous_plan=json.dumps(plan_answer(previous)) if previous else "(none)",
                        feedback=feedback or "(none)", task=text, answer_limits=answer_limits(schema),
                        objective=GAME_OBJECTIVE if is_game(task) else GOAL_OBJECTIVE)
        return prompt, schema

    def plan(self, task: common_pb2.TaskSpec, *, iteration: int = 0, previous: planner_pb2.Plan | None = None,
             feedback: str = "") -> tuple[planner_pb2.Plan, CallRecord]:
        prompt, schema = self.prompt(task, previous, feedback)
        answer, record = self.llm.complete(AGENT, [{"role": "user", "content": prompt}], schema, iteration=iteration)
        return plan_to_proto(answer, iteration), record
