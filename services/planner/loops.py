"""The two loops of RL-GPT (paper, Algorithm 1): loop control, budgets, stop and resume.

Inner loop, per sub-task, at most I iterations: an attempt (:mod:`services.planner.attempts`: the fast agent's
code tested through RunSkill, or its RL config trained by the learner and evaluated), the verdict, the fast agent
revises with it. The coded sub-tasks go first, one after another in plan order; then the RL sub-tasks train
together in rounds (configs and verdicts one after another in plan order, the trainings at once, at most
``parallel_trainings``). Outer loop, at most O iterations: the critic's summaries go back to the slow agent,
which may move sub-tasks between code and RL, split or reorder them; a sub-task whose code fails every inner
iteration moves to RL on its own. Then the task-level controller (:mod:`services.planner.controller`) evaluates
the whole task. Every decision, record, code version, config, curve and verdict lands in the run directory
(``state.json``, ``events.jsonl``, ``attempts/``), and a resumed run skips what is done.

Modes (the paper's ablations, :class:`~services.planner.context.Mode`): ``rl-gpt`` (both), ``pure-code`` (every
sub-task coded), ``pure-rl`` (one RL training on the whole task, primitives only, no LLM). Agent setups
(:class:`~services.planner.context.AgentSetup`): ``one`` (one LLM plans, codes and configures in one answer per
outer iteration, :mod:`services.planner.agents.one`; no critic), ``slow-fast`` (no critic), and
``slow-fast-critic``.
"""

from __future__ import annotations

import enum
import logging
import time

import grpc

from rlgpt import metrics, worlds
from rlgpt.prompts import CompletesJSON
from rlgpt.stats import rate_text
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner import kept_plan, task_review
from services.planner.action_space import SUCCESS_REWARD
from services.planner.agents.fast import FastAgent
from services.planner.agents.one import OneAgent
from services.planner.agents.one_answers import recorded_answer
from services.planner.agents.slow import SlowAgent
from services.planner.attempts import Attempts, training_frames
from services.planner.context import AgentSetup, Mode, RunContext, Stubs
from services.planner.controller import NO_CONTROLLER, final_evaluation, iteration_evaluation
from services.planner.planning import PlanMaking
from services.planner.plans import start_inventory, summary, task_subtask
from services.planner.program_writer import resolve_skill_format
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import Decision, IterationRecord, RunState, Status, SubTaskState
from services.planner.trainings import run_trainings

log = logging.getLogger(__name__)
FRAMES_SPENT = "the run's frame budget is spent"
"""The feedback of a sub-task left unattempted because the run's frames are spent."""


class Step(enum.Enum):
    """What the inner loop does after a verdict."""

    AGAIN = "again"
    """Another attempt (the fast agent revises), while the inner budget lasts."""
    DONE = "done"
    TO_SLOW = "to slow"
    """Back to the slow agent: the sub-task fails for this outer iteration."""


class TwoLoops(PlanMaking):
    """Runs one RL-GPT run to its end (or until stopped), resumable from its state."""

    def __init__(self, run: Run, state: RunState, describe: env_pb2.DescribeResponse, llm: CompletesJSON | None,
                 library: SkillLibrary, stubs: Stubs, settings: PlannerSettings):
        self.ctx = ctx = RunContext.create(run, state, describe, stubs, library, settings)
        self.one: OneAgent | None = None
        skill_format = resolve_skill_format(settings.skill_format, str(getattr(llm, "model", "")), describe)
        if llm is not None and ctx.agents == AgentSetup.ONE:
            # One LLM plans, codes and configures in one answer; its revision is the next outer iteration's answer.
            self.one = OneAgent(llm, stubs.env, describe, library, seed=ctx.seed, protocol=ctx.protocol,
                                allow_rl=ctx.mode != Mode.PURE_CODE and stubs.learner is not None,
                                skill_format=skill_format)
            if state.plan and (parsed := recorded_answer(run.dir)):
                self.one.restore(parsed, state.outer_iteration)  # a resumed run serves the answer it had
        self.check_plans = settings.plan_check == "on" or (settings.plan_check == "auto" and skill_format == "program")
        # Small models (programs) name sub-tasks and conditions from the goal's prerequisites: they copy placeholders.
        self.slow = SlowAgent(llm, describe, library, ctx.protocol, closed_names=skill_format == "program") \
            if llm is not None else None
        fast = (self.one.fast() if self.one is not None else
                FastAgent(llm, stubs.env, describe, library, seed=ctx.seed, protocol=ctx.protocol,
                          skill_format=skill_format)
                if llm is not None else None)
        self.attempts = Attempts(ctx, fast)

    @property
    def state(self) -> RunState:
        return self.ctx.state

    def execute(self) -> None:
        if self.state.finished:
            return
        self._register_known_skills()
        if self.ctx.mode == Mode.PURE_RL:
            self._pure_rl()
        else:
            self._iterate()
        if self.state.final is None:
            self.ctx.check_stop()
            kept = kept_plan.final_controller(self.ctx)
            final = (kept_plan.evaluate_kept_plan(self.ctx, kept, episodes=self.ctx.budgets.eval_episodes,
                                                  seed=worlds.final_worlds(self.ctx.seed))
                     if kept else final_evaluation(self.ctx))
            self.state.final = final.as_json()
            self.ctx.run.success_rate = final.success_rate
            self.ctx.save()
        self.state.finished = True
        self.ctx.save()

    def _register_known_skills(self) -> None:
        """The env server may be new (a resumed run, a restarted server): register what earlier work produced."""
        known = {s.name: s.code for s in self.ctx.library.all() if s.success_rate > 0}
        known.update({name: sub.skill_code for name, sub in self.state.subtasks.items()
                      if sub.status == Status.DONE and sub.decision == Decision.CODE and sub.skill_code})
        for sub in self.state.subtasks.values():
            known.update(sub.macro_actions)  # an RL sub-task's own macro actions: its policy calls them
        for name, code in known.items():
            try:
                self.ctx.stubs.env.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True,
                                                                              description="restored"))
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                log.warning("skill %s could not be restored: %s", name, exc.details())

    def _task(self) -> planner_pb2.SubTask:
        return task_subtask(self.ctx.run.request.task, Decision.RL if self.ctx.mode == Mode.PURE_RL
                            else Decision.CODE)

    def _pure_rl(self) -> None:
        """The baseline: one training on the whole task, primitives only, default dense reward, no LLM."""
        ctx = self.ctx
        plan = planner_pb2.Plan(subtasks=[self._task()], iteration=0, rationale="pure RL baseline")
        self._adopt_plan(plan)
        st = plan.subtasks[0]
        state = self.state.subtasks[st.name]
        if state.status == Status.DONE or state.job_id:
            return
        config = learner_pb2.RLConfig(
            name=st.name, task=common_pb2.TaskSpec(name=st.name, success=list(st.success)),
            env_frames=ctx.budgets.total_env_frames or ctx.budgets.env_frames_per_training,
            episode_length=ctx.settings.final_episode_frames, seed=ctx.seed,
            reward_terms=[common_pb2.RewardTerm(kind="success", weight=SUCCESS_REWARD),
                          common_pb2.RewardTerm(kind="achievement", target="*", weight=1.0)])
        self.attempts.train(st, state, config)

    def _adopt_plan(self, plan: planner_pb2.Plan) -> None:
        if self.ctx.mode == Mode.PURE_CODE:
            for st in plan.subtasks:
                st.decision = planner_pb2.DECISION_CODE
        self.state.set_plan(plan)
        self.ctx.run.plan = plan
        self.ctx.run.emit(plan=plan)
        self.ctx.save()

    # --- outer loop ---------------------------------------------------------------------------------
    def _iterate(self) -> None:
        ctx = self.ctx
        while not self.state.stop_reason and self.state.outer_iteration < ctx.budgets.max_outer_iterations:
            ctx.check_stop()
            ctx.run.iteration = self.state.outer_iteration
            started, tokens_before = time.time(), ctx.run.tokens
            frames_before = self.state.frames_used
            plan = self.state.plan_proto()
            if plan is None or self.state.slow_feedback:
                plan = self._new_plan(plan)
                self._adopt_plan(plan)
            # Coded sub-tasks first, in plan order; then the RL ones together (decided as the iteration began: a
            # sub-task moved to RL now is trained in the next iteration, once the slow agent saw why).
            rl = {st.name for st in plan.subtasks if self.state.subtasks[st.name].decision == Decision.RL}
            for st in plan.subtasks:
                if st.name not in rl:
                    ctx.check_stop()
                    self._solve(st, plan)
            ctx.check_stop()
            self._train_rl([st for st in plan.subtasks if st.name in rl], plan)
            ctx.check_stop()
            record = IterationRecord(iteration=self.state.outer_iteration, tokens=0, seconds=0.0,
                                     frames=self.state.frames_used - frames_before)
            self._evaluate_iteration(record, plan)
            record.tokens, record.seconds = ctx.run.tokens - tokens_before, time.time() - started
            self.state.iterations.append(record.as_json())
            ctx.run.emit(iteration_end=planner_pb2.IterationEnd(
                tokens=record.tokens, seconds=record.seconds, iteration=record.iteration, frames=record.frames,
                success_rate=record.success_rate, controller=record.controller))
            self.state.outer_iteration += 1
            metrics.PLANNER_ITERATIONS.inc()
            self.state.stop_reason = self._stop_reason(record)
            ctx.save()
        if not self.state.stop_reason:  # a resumed run that had spent its iterations before this field existed
            self.state.stop_reason = f"its {ctx.budgets.max_outer_iterations} outer iterations are spent"
            ctx.save()
        self._keep_plan()

    def _stop_reason(self, record: IterationRecord) -> str:
        """Why the outer loop ends after this iteration ("" while it goes on): the whole task decides, never every
        sub-task being marked done."""
        ctx, target = self.ctx, self.ctx.budgets.target_success
        if record.success_rate is not None and record.success_rate >= target:
            return (f"the whole task reached its target: {rate_text(sum(record.successes), len(record.successes))}"
                    f" >= {target:.0%}")
        if ctx.frames_left() == 0:
            return f"its frame budget is spent ({ctx.state.frames_used} of {ctx.budgets.total_env_frames} frames)"
        if self.state.outer_iteration >= ctx.budgets.max_outer_iterations:
            return (f"its {ctx.budgets.max_outer_iterations} outer iterations are spent, below its target of "
                    f"{target:.0%}")
        return ""

    def _keep_plan(self) -> None:
        """RL inside the chain, not instead of it, after the last iteration, then the fast agent's revisions of its
        config while the policy does not beat the plan alone: also on a resume that finds the iterations done but
        these trainings not (a stop during one)."""
        plan = self.state.plan_proto()
        last = self.state.iterations[-1] if self.state.iterations else {}
        if kept_plan.wanted(self.ctx, plan, last.get("success_rate")):
            assert plan is not None
            kept_plan.train_kept_plan(self.ctx, self.attempts, plan, last["success_rate"], last.get("failed", []))
        while plan is not None and (revision := kept_plan.revision_of(self.ctx)) is not None:
            chain = (self.state.kept_plan or {}).get("chain_success_rate", 0.0)
            kept_plan.train_kept_plan(self.ctx, self.attempts, plan, chain, last.get("failed", []), revision)

    def _evaluate_iteration(self, record: IterationRecord, plan: planner_pb2.Plan) -> None:
        """The whole task's chain as it stands after the iteration (the paper's success per iteration), kept only
        if better than the best so far on the same worlds; below the target, the whole task's verdict hands out
        the next iteration's work (:mod:`services.planner.task_review`)."""
        ctx = self.ctx
        evaluation = iteration_evaluation(ctx)
        record.controller = evaluation.controller + (f"; error: {evaluation.error}" if evaluation.error else "")
        record.episodes, record.failed = evaluation.episodes, evaluation.failed
        record.successes, record.links = evaluation.successes, evaluation.links
        if not evaluation.error and evaluation.controller != NO_CONTROLLER:
            record.success_rate = evaluation.success_rate
            record.kept = task_review.keep_best(ctx, record)
        log.info("iteration %d: whole task %s with %s (%s)", record.iteration,
                 "not evaluated" if record.success_rate is None else f"{record.success_rate:.0%}",
                 record.controller, record.kept)
        if record.success_rate is not None and record.success_rate >= ctx.budgets.target_success:
            return
        pending = [s for s in plan.subtasks if self.state.subtasks[s.name].status != Status.DONE]
        if pending:  # sub-tasks that failed: the slow agent sees why, as before any whole-task verdict
            self.state.slow_feedback = summary(plan, self.state)
            return
        verdict = task_review.judged(ctx, plan, record, evaluation.episode_summaries, ctx.budgets.target_success)
        record.verdict = task_review.verdict_json(verdict)
        reopened = task_review.apply(ctx, plan, verdict)
        ctx.run.emit(reopened, verdict=verdict)

    # --- inner loop ---------------------------------------------------------------------------------
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
            step = self._apply_verdict(st, state, self.attempts.code(st, state, start))
            if step is Step.DONE:
                return
            if step is Step.TO_SLOW:
                break
        self._give_up(state, inner_budget)

    def _train_rl(self, subtasks: list[planner_pb2.SubTask], plan: planner_pb2.Plan) -> None:
        """The inner loop of the iteration's RL sub-tasks, together, in rounds. Each round: every sub-task still
        in gets its config from the fast agent, one after another in plan order (a replay answers each agent's
        calls in recorded order), each offered an equal share of the frames left (:func:`training_frames`: together
        they never overspend); their trainings run at once (:func:`run_trainings`); the verdicts come and are
        applied one after another in plan order, as :meth:`_solve` applies them. A sub-task leaves when done, when
        its inner budget is spent or when the verdict sends it back to the slow agent; the rounds end once the
        shares of what is left are 0 frames."""
        ctx = self.ctx
        inner_budget = self._inner_budget()
        starts = {st.name: start_inventory(plan, st, ctx.describe.rules, ctx.items) for st in subtasks}
        active = [st for st in subtasks if self.state.subtasks[st.name].status != Status.DONE]
        while True:
            spent = [st.name for st in active if self.state.subtasks[st.name].inner_iterations >= inner_budget]
            for name in spent:
                self._give_up(self.state.subtasks[name], inner_budget)
            active = [st for st in active if st.name not in spent]
            if not active:
                return
            ctx.check_stop()
            share = training_frames(ctx.budgets.env_frames_per_training, ctx.frames_left(), len(active))
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
            active = []
            for attempt in attempts:
                step = self._apply_verdict(attempt.st, attempt.state, self.attempts.verdict(attempt))
                if step is Step.TO_SLOW:
                    self._give_up(attempt.state, inner_budget)
                elif step is Step.AGAIN:
                    active.append(attempt.st)

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

