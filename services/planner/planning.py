"""How each outer iteration gets its plan (a mixin of :class:`services.planner.loops.TwoLoops`): the slow agent's
(or the one agent's) answer, ending in the task's own step, and, where plan checks are on, checked against the
world's rules (:mod:`services.planner.plan_rules`): sent back once with the violations, then repaired."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlgpt.llm.client import StructuredOutputError
from rlgpt.prompts import shorten
from rlgpt.v1 import planner_pb2
from services.planner import coding_failed, survival
from services.planner.agents.one_answers import AnsweredPlan
from services.planner.context import Mode
from services.planner.curriculum import curriculum_violations, repair_curriculum
from services.planner.plan_rules import needs_named, plan_violations, repair_plan
from services.planner.plans import ending_in_goal, task_subtask
from services.planner.state import Decision

if TYPE_CHECKING:
    from services.planner.agents.one import OneAgent
    from services.planner.agents.slow import SlowAgent
    from services.planner.context import RunContext
    from services.planner.state import RunState

log = logging.getLogger("services.planner.loops")


class PlanMaking:
    """The plan of an outer iteration; the loops provide the run's context and agents."""

    ctx: RunContext
    slow: SlowAgent | None
    one: OneAgent | None
    check_plans: bool
    state: RunState  # the loops' property: the run's state
    _task: Callable[[], planner_pb2.SubTask]  # the loops' method: the whole task as one sub-task

    def _new_plan(self, previous: planner_pb2.Plan | None) -> planner_pb2.Plan:
        """The iteration's plan; coding does not get back what it already failed (:func:`coding_failed.kept_rl`:
        a sub-task the one agent coded that way has no RL answer of its, as one the repair adds, until it revises)."""
        return coding_failed.kept_rl(self._answered_plan(previous), self.state)

    def _answered_plan(self, previous: planner_pb2.Plan | None) -> planner_pb2.Plan:
        ctx = self.ctx
        if self.slow is None:
            return planner_pb2.Plan(subtasks=[self._task()], iteration=self.state.outer_iteration,
                                    rationale="no LLM: the whole task is one sub-task")
        # The task itself ends the chain: learned with RL over the earlier skills where a learner exists.
        goal = task_subtask(ctx.run.request.task, Decision.RL if ctx.mode != Mode.PURE_CODE
                            and ctx.stubs.learner is not None else Decision.CODE)
        try:
            if self.one is not None:
                plan, record = self.one.solve(
                    ctx.run.request.task, iteration=self.state.outer_iteration,
                    previous=AnsweredPlan.from_state(previous, self.state) if previous is not None else None,
                    feedback=self.state.slow_feedback)
            else:
                plan, record = self.slow.plan(ctx.run.request.task, iteration=self.state.outer_iteration,
                                              previous=previous, feedback=self.state.slow_feedback)
        except StructuredOutputError as exc:
            # No usable plan: fall back to the whole task as one sub-task rather than ending the run.
            log.warning("slow agent: %s; %s", exc, "repairing from the rules" if self.check_plans
                        else "using the whole task as one sub-task")
            if exc.record is not None:
                ctx.run.llm_call(exc.record)  # a replay must meet this call too
            why = shorten(str(exc), 300)
            if self.check_plans and not ctx.game:  # the rules' own chain up to the task, not the task in one step
                return self._repaired(planner_pb2.Plan(subtasks=[goal],
                                                       rationale=f"the slow agent's answer was unusable: {why}"))
            return planner_pb2.Plan(subtasks=[self._task()], iteration=self.state.outer_iteration,
                                    rationale=f"fallback, the slow agent's answer was unusable: {why}")
        ctx.run.llm_call(record)
        plan = ending_in_goal(plan, goal)
        return self._within_rules(plan, goal) if self.check_plans else plan

    def _allowed_needs(self) -> set[str]:
        """Survival needs the critic's summary names: no side quests; after an evaluation whose players died
        (:func:`survival.reported`), every achievement and item (the feedback invites sub-tasks that keep the
        player alive, and which ones do is the slow agent's call)."""
        names = [*self.ctx.describe.achievements, *self.ctx.describe.items]
        return set(names) if survival.reported(self.state.slow_feedback) else needs_named(self.state.slow_feedback,
                                                                                            names)

    def _repaired(self, plan: planner_pb2.Plan) -> planner_pb2.Plan:
        """The plan repaired from the rules: toward the task's goal, or for a game (a curriculum, no one goal)
        toward each achievement the plan aimed at (:func:`repair_curriculum`)."""
        ctx = self.ctx
        if ctx.game:
            repaired = repair_curriculum(plan, ctx.describe.rules, set(ctx.describe.achievements), ctx.items,
                                         self._allowed_needs())
        else:
            repaired = repair_plan(plan, ctx.run.request.task, ctx.describe.rules, ctx.items,
                                   self._allowed_needs())
        repaired.iteration = self.state.outer_iteration
        return repaired

    def _ask_again(self, plan: planner_pb2.Plan, feedback: str) -> tuple[planner_pb2.Plan, Any]:
        """The planning agent's second answer, the first plan (and its answers, for the one agent) shown."""
        task, iteration = self.ctx.run.request.task, self.state.outer_iteration
        if self.one is not None:
            first = self.one.answered if self.one.answered is not None else AnsweredPlan(plan)
            return self.one.solve(task, iteration=iteration, previous=first, feedback=feedback)
        assert self.slow is not None
        return self.slow.plan(task, iteration=iteration, previous=plan, feedback=feedback)

    def _violations(self, plan: planner_pb2.Plan, allowed: set[str]) -> list[str]:
        """The plan's violations of the rules; a game curriculum's own mistakes too (:func:`curriculum_violations`)."""
        ctx = self.ctx
        found = plan_violations(plan, ctx.run.request.task, ctx.describe.rules, ctx.items, allowed)
        return found + curriculum_violations(plan, set(ctx.describe.achievements)) if ctx.game else found

    def _within_rules(self, plan: planner_pb2.Plan, goal: planner_pb2.SubTask) -> planner_pb2.Plan:
        """The planning agent's plan (the slow agent's, or the one agent's) checked against the world's rules
        (:mod:`services.planner.plan_rules`): one that breaks them goes back to the agent once, with the
        violations; a second that still breaks them, or no usable second answer, is repaired from the rules (a
        game's curriculum toward the achievements it aimed at; a sub-task the repair adds has no answer of the one
        agent's: the loops treat it as unanswered until it revises the plan). Survival needs the critic's summary
        names are no side quests."""
        ctx = self.ctx
        allowed = self._allowed_needs()
        violations = self._violations(plan, allowed)
        if not violations or self.slow is None:
            return plan
        who = "one agent" if self.one is not None else "slow agent"
        log.info("%s: the plan breaks the game's rules (%s); asking once more", who, "; ".join(violations))
        feedback = "\n".join(filter(None, [self.state.slow_feedback,
                                            "Your plan breaks the game's rules: " + "; ".join(violations)]))
        try:
            second, record = self._ask_again(plan, feedback)
        except StructuredOutputError as exc:
            log.info("%s: no usable second plan (%s); the first is repaired from the rules", who, exc)
            if exc.record is not None:
                ctx.run.llm_call(exc.record)
            return self._repaired(plan)
        ctx.run.llm_call(record)
        second = ending_in_goal(second, goal)
        left = self._violations(second, allowed)
        if not left:
            log.info("%s: the second plan keeps the game's rules", who)
            return second
        log.info("%s: the second plan still breaks the game's rules (%s); repaired from the rules", who,
                 "; ".join(left))
        return self._repaired(second)

