"""The inner loop of RL-GPT (paper, Algorithm 1), per sub-task and outer iteration: attempts (the fast agent's code
tested through RunSkill, or its RL config trained by the learner and evaluated), their verdicts, the fast agent's
revisions, while the inner budget lasts. Coded sub-tasks one after another; RL sub-tasks together in rounds. The
outer loop (:mod:`services.planner.loops`) calls it."""

from __future__ import annotations

import enum
import logging

from rlgpt.v1 import critic_pb2, planner_pb2
from services.planner import coding_failed
from services.planner.agents.one import OneAgent
from services.planner.attempts import Attempts, training_frames
from services.planner.context import Mode, RunContext
from services.planner.controller import coded_skills
from services.planner.plans import start_inventory
from services.planner.state import Decision, RunState, Status, SubTaskState
from services.planner.trainings import run_trainings

log = logging.getLogger(__name__)
FRAMES_SPENT = "the run's frame budget is spent"
"""The feedback of a sub-task left unattempted because the run's frames are spent."""


def waiting_text(blocker: str) -> str:
    return (f"not trained this iteration: {blocker}, before it in the plan, is not done, so its training could not "
            "start where the chain hands it over; it trains once that link is done")


def alone_text(blocker: str) -> str:
    return (f"trained from the rules' start items, not behind the chain: {blocker}, before it in the plan, is not "
            "done (its code failed its tests) and trains no further this iteration, so the chain cannot hand it over")


class Step(enum.Enum):
    """What the inner loop does after a verdict."""

    AGAIN = "again"
    """Another attempt (the fast agent revises), while the inner budget lasts."""
    DONE = "done"
    TO_SLOW = "to slow"
    """Back to the slow agent: the sub-task fails for this outer iteration."""


class InnerLoops:
    """The inner loops of an outer iteration; the outer loop provides the run's context, attempts and agents."""

    ctx: RunContext
    attempts: Attempts
    one: OneAgent | None
    state: RunState  # the outer loop's property: the run's state

    def _inner_budget(self) -> int:
        """Attempts per sub-task and outer iteration; the one agent revises in its next outer answer: one."""
        return 1 if self.one is not None else self.ctx.budgets.max_inner_iterations

    def _solve(self, st: planner_pb2.SubTask, plan: planner_pb2.Plan) -> None:
        """The inner loop of a coded sub-task: attempts until it is done, its budget is spent or the verdict sends
        it back to the slow agent."""
        ctx = self.ctx
        state = self.state.subtasks[st.name]
        if state.status == Status.DONE:
            return
        start = start_inventory(plan, st, ctx.describe.rules, ctx.items)
        inner_budget = self._inner_budget()
        while state.inner_iterations < inner_budget:
            ctx.check_stop()
            if ctx.frames_left() == 0:
                state.feedback = FRAMES_SPENT
                return
            step = self._apply_verdict(st, state, self.attempts.code(st, state, start, plan))
            if step is Step.DONE:
                return
            if step is Step.TO_SLOW:
                break
        self._give_up(state, inner_budget)
        if state.decision == Decision.RL:  # moved: a later plan must not hand these conditions back to code
            coding_failed.remember(self.state, st, state)

    def _train_rl(self, subtasks: list[planner_pb2.SubTask], plan: planner_pb2.Plan) -> None:
        """The inner loop of the iteration's RL sub-tasks, together, in rounds. Each round: every sub-task still
        in gets its config from the fast agent, one after another in plan order (a replay answers each agent's
        calls in recorded order), each offered an equal share of the frames left among the sub-tasks still in
        (:func:`training_frames`: together they never overspend; a link waiting behind one that trains keeps its
        share); their trainings run at once (:func:`run_trainings`); the verdicts come and are
        applied one after another in plan order, as :meth:`_solve` applies them. A sub-task leaves when done, when
        its inner budget is spent or when the verdict sends it back to the slow agent; the rounds end once the
        shares of what is left are 0 frames. A link coding failed this iteration (moved to RL) joins the rounds
        when an RL link waits behind it."""
        ctx = self.ctx
        inner_budget = self._inner_budget()
        starts = {st.name: start_inventory(plan, st, ctx.describe.rules, ctx.items) for st in plan.subtasks}
        pending = [st for st in subtasks if self.state.subtasks[st.name].status != Status.DONE]
        tried = {st.name for st in pending}
        order = {st.name: i for i, st in enumerate(plan.subtasks)}
        while True:
            spent = [st.name for st in pending if self.state.subtasks[st.name].inner_iterations >= inner_budget]
            for name in spent:
                self._give_up(self.state.subtasks[name], inner_budget)
            pending = [st for st in pending if st.name not in spent]
            # A link behind one that is not done would start where the chain cannot hand it over: it waits while
            # that link trains (the frames go to it first, the waiting link's share kept), and trains from the
            # rules' start items when that link does not train this iteration (code that failed its tests).
            blocked = {st.name: blocker for st in pending if (blocker := self._unfinished_before(plan, st))}
            # The blocking link moved to RL this iteration trains now, behind the chain (its earlier links are done),
            # rather than in the next iteration after the frames went to the links behind it.
            joining = [st for st in plan.subtasks if st.name in blocked.values() and st.name not in tried
                       and self.state.subtasks[st.name].decision == Decision.RL]
            for st in joining:
                log.info("%s (coding failed, moved to RL) trains in this iteration's RL rounds: %s waits behind it",
                         st.name, ", ".join(name for name, blocker in blocked.items() if blocker == st.name))
            pending = sorted([*pending, *joining], key=lambda st: order[st.name])
            tried.update(st.name for st in joining)
            waiting = {name: blocker for name, blocker in blocked.items()
                       if any(st.name == blocker for st in pending)}
            alone = {name: alone_text(blocker) for name, blocker in blocked.items() if name not in waiting}
            for name, blocker in blocked.items():
                self.state.subtasks[name].feedback = waiting_text(blocker) if name in waiting else alone[name]
            active = [st for st in pending if st.name not in waiting]
            if not active:
                return
            ctx.check_stop()
            share = training_frames(ctx.budgets.env_frames_per_training, ctx.frames_left(), len(pending))
            if share == 0:  # what is left, shared out, trains nothing
                for st in active:
                    self.state.subtasks[st.name].feedback = FRAMES_SPENT
                return
            attempts = []
            for st in active:
                ctx.check_stop()
                attempts.append(self.attempts.configure(st, self.state.subtasks[st.name], starts[st.name], plan,
                                                        env_frames=share))
            run_trainings(attempts, self.attempts.train_and_evaluate, self.ctx.settings.parallel_trainings)
            pending = [st for st in pending if st.name in waiting]  # they may start once their link is done
            for attempt in attempts:
                step = self._apply_verdict(attempt.st, attempt.state, self.attempts.verdict(attempt))
                if attempt.st.name in alone:  # the slow agent reads where it trained (first: its summary is cut)
                    attempt.state.feedback = f"{alone[attempt.st.name]}. {attempt.state.feedback}".strip()
                if step is Step.TO_SLOW:
                    self._give_up(attempt.state, inner_budget)
                elif step is Step.AGAIN:
                    pending.append(attempt.st)
            pending.sort(key=lambda st: order[st.name])

    def _unfinished_before(self, plan: planner_pb2.Plan, st: planner_pb2.SubTask) -> str:
        """The first link of ``st``'s chain prefix (every earlier sub-task has code: attempts.chain_prefix) that is
        not done, e.g. code that failed its tests; "" when none is or no prefix applies (an earlier link with no
        code: the training starts from the rules' start items, beside the trainings of the earlier links)."""
        names = [other.name for other in plan.subtasks]
        earlier = names[:names.index(st.name)] if st.name in names else []
        codes = dict(coded_skills(plan, self.state))
        if not all(name in codes for name in earlier):
            return ""
        return next((name for name in earlier if self.state.subtasks[name].status != Status.DONE), "")

    def _apply_verdict(self, st: planner_pb2.SubTask, state: SubTaskState,
                       verdict: critic_pb2.Verdict | None) -> Step:
        """An attempt's verdict applied to its sub-task (coded and RL alike): the attempt counts (once it ran: a
        paused attempt is redone on resume), the verdict becomes the sub-task's feedback, a passed or kept
        sub-task is done; what the inner loop does next."""
        ctx = self.ctx
        state.inner_iterations += 1
        if verdict is None:
            return Step.AGAIN
        state.success_rate = verdict.success_rate
        state.feedback = f"{verdict.diagnosis} {verdict.suggestion}".strip()
        ctx.run.emit(st.name, verdict=verdict)
        ctx.save()
        if verdict.success or verdict.target == critic_pb2.TARGET_KEEP:
            state.status = Status.DONE  # a passed sub-task is kept
            ctx.save()
            return Step.DONE
        return Step.TO_SLOW if verdict.target == critic_pb2.TARGET_SLOW else Step.AGAIN

    def _give_up(self, state: SubTaskState, inner_budget: int) -> None:
        """A sub-task that leaves the inner loop unsolved: failed for this outer iteration (the slow agent sees
        it), its inner count reset; code that kept failing moves to RL (with the skills that work as macro
        actions)."""
        ctx = self.ctx
        state.status = Status.FAILED
        if state.decision == Decision.CODE and state.code_failures >= inner_budget \
                and ctx.mode == Mode.RL_GPT and ctx.stubs.learner is not None:
            state.decision = Decision.RL
            state.feedback += " (coding failed repeatedly: moved to RL)"
        state.inner_iterations = 0
        ctx.save()

