"""The two loops of RL-GPT (paper, Algorithm 1): loop control, budgets, stop and resume.

Inner loop, per sub-task, at most I iterations (:mod:`services.planner.inner_loops`): an attempt, the verdict, the
fast agent revises with it; coded sub-tasks first, then the RL ones together in rounds. Outer loop, at most O
iterations: the critic's summaries go back to the slow agent, which may move sub-tasks between code and RL, split
or reorder them; then the task-level controller (:mod:`services.planner.controller`) evaluates the whole task on
the same worlds after every iteration, and the whole task decides (:mod:`services.planner.task_review`): the run
ends when the whole task reaches its target (``target_success``) or the frames or outer iterations are spent,
never because every sub-task is marked done; below the target the whole task's verdict reopens a link or sends the
slow agent back to the plan, and the best controller on those worlds (paired) is the one kept. Every decision,
record, code version, config, curve and verdict lands in the run directory (``state.json``, ``events.jsonl``,
``attempts/``), and a resumed run skips what is done.

Modes (the paper's ablations, :class:`~services.planner.context.Mode`): ``rl-gpt`` (both), ``pure-code`` (every
sub-task coded), ``pure-rl`` (one RL training on the whole task, primitives only, no LLM). Agent setups
(:class:`~services.planner.context.AgentSetup`): ``one`` (one LLM plans, codes and configures in one answer per
outer iteration, :mod:`services.planner.agents.one`; no critic), ``slow-fast`` (no critic), and
``slow-fast-critic``.
"""

from __future__ import annotations

import logging

import grpc

from rlgpt import metrics, worlds
from rlgpt.prompts import CompletesJSON
from rlgpt.stats import rate_text
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner import game_final, game_task, kept_plan, survival, task_review
from services.planner.action_space import SUCCESS_REWARD
from services.planner.agents.fast import FastAgent
from services.planner.agents.one import OneAgent
from services.planner.agents.one_answers import recorded_answer
from services.planner.agents.slow import SlowAgent
from services.planner.animations import write_animations
from services.planner.attempts import Attempts
from services.planner.context import AgentSetup, Mode, RunContext, Stubs
from services.planner.controller import (
    NO_CONTROLLER,
    chain_skill_name,
    coded_skills,
    final_evaluation,
    iteration_evaluation,
)
from services.planner.inner_loops import InnerLoops
from services.planner.iteration_costs import begin_iteration, iteration_frames, iteration_seconds, iteration_tokens
from services.planner.planning import PlanMaking
from services.planner.plans import summary, task_subtask
from services.planner.program_writer import resolve_skill_format
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import Decision, IterationRecord, RunState, Status
from services.planner.trainings import settle_trainings

log = logging.getLogger(__name__)
ANIMATIONS = 1
"""Successful and failed episodes of the final evaluation the report animates (one of each)."""


class TwoLoops(PlanMaking, InnerLoops):
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
        # When an earlier process's part of the run ended (its last event); None for a run started here.
        self._previous_end = run.events[-1].time if run.events else None

    @property
    def state(self) -> RunState:
        return self.ctx.state

    def execute(self) -> None:
        if self.state.finished:
            return
        self._register_known_skills()
        self.ctx.run.iteration = self.state.outer_iteration
        settle_trainings(self.ctx)  # trainings under way when the run paused count all their frames
        if self.ctx.mode == Mode.PURE_RL:
            self._pure_rl()
        else:
            self._iterate()
        if self.state.final is None:
            self.ctx.check_stop()
            kept = None if self.ctx.game else kept_plan.final_controller(self.ctx)
            seed, episodes = worlds.final_worlds(self.ctx.seed), self.ctx.budgets.eval_episodes
            final = (game_final.evaluate(self.ctx, episodes=episodes, seed=seed, animate=ANIMATIONS)
                     if self.ctx.game else
                     kept_plan.evaluate_kept_plan(self.ctx, kept, episodes=episodes, seed=seed, animate=ANIMATIONS)
                     if kept else final_evaluation(self.ctx, animate=ANIMATIONS))
            final.animations = write_animations(self.ctx.run.dir, final.episode_summaries)
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
        # The plan's code under the names trained policies call it by: the chain's (a macro-action policy's macro
        # actions, the chain's links) and the kept plan's steps. Not restored, a resumed run's final evaluation of
        # such a policy failed (the env server: no skill named ...).
        for name, code in coded_skills(self.state.plan_proto(), self.state):
            known[chain_skill_name(self.ctx, name)] = code
            known[kept_plan.kept_step_name(self.ctx, name)] = code
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
        task = ctx.run.request.task
        if ctx.game:  # the game's own reward and episodes; the frames its policy's and the final evaluation leave
            left, evaluation = ctx.frames_left(), ctx.evaluation_hold()
            game_task.on_the_game(config, task, ctx.settings)
            config.env_frames = ctx.budgets.env_frames_per_training if left is None else max(0, left - evaluation)
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
            start = begin_iteration(self.state, self.state.outer_iteration, self._previous_end)
            ctx.save()  # a resume of this iteration counts from here
            plan = self.state.plan_proto()
            if plan is None or self.state.slow_feedback:
                plan = self._new_plan(plan)
                self.state.slow_feedback = ""  # answered: a resume of this iteration keeps the plan, not asks again
                self._adopt_plan(plan)
            # Coded sub-tasks first, in plan order; then the RL ones together (decided as the iteration began: a
            # sub-task moved to RL now is trained in the next iteration, once the slow agent saw why, unless an RL
            # link waits behind it: then it trains first, in this iteration's rounds).
            rl = {st.name for st in plan.subtasks if self.state.subtasks[st.name].decision == Decision.RL}
            for st in plan.subtasks:
                if st.name not in rl:
                    ctx.check_stop()
                    self._solve(st, plan)
            ctx.check_stop()
            self._train_rl([st for st in plan.subtasks if st.name in rl], plan)
            ctx.check_stop()
            record = IterationRecord(iteration=self.state.outer_iteration, tokens=0, seconds=0.0,
                                     frames=iteration_frames(self.state, start))
            self._evaluate_iteration(record, plan)
            record.tokens, record.seconds = iteration_tokens(ctx.run, record.iteration), iteration_seconds(start)
            self.state.iterations.append(record.as_json())
            self.state.iteration_start = None
            ctx.run.emit(iteration_end=planner_pb2.IterationEnd(
                tokens=record.tokens, seconds=record.seconds, iteration=record.iteration, frames=record.frames,
                success_rate=record.success_rate, controller=record.controller, score=record.score))
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
        ctx, target, task = self.ctx, self.ctx.budgets.target_success, self.ctx.run.request.task
        if game_task.on_target(task, record.success_rate, record.score, target):
            reached = (game_task.score_text(record.score) if ctx.game else
                       rate_text(sum(record.successes), len(record.successes)))
            return f"the whole task reached its target: {reached} >= {game_task.target_text(task, target)}"
        if ctx.frames_left() == 0 or not ctx.evaluation_fits():
            kept = " and the frames its final evaluation keeps" if ctx.game else ""
            return (f"its frame budget is spent ({ctx.state.frames_used} of {ctx.budgets.total_env_frames} "
                    f"frames{kept})")
        if self.state.outer_iteration >= ctx.budgets.max_outer_iterations:
            return (f"its {ctx.budgets.max_outer_iterations} outer iterations are spent, below its target of "
                    f"{game_task.target_text(task, target)}")
        return ""

    def _keep_plan(self) -> None:
        """RL inside the chain, not instead of it, after the last iteration, then the fast agent's revisions of its
        config while the policy does not beat the plan alone: also on a resume that finds the iterations done but
        these trainings not (a stop during one)."""
        plan = self.state.plan_proto()
        last = task_review.in_force(self.state.iterations, self.state.best)  # a rolled-back revision is not in force
        if self.ctx.game:  # the game's own reward: coded skills as macro actions, and RL around the kept plan
            game_final.train(self.ctx, self.attempts, plan)
            return
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
        self.state.slow_feedback = ""  # this iteration's plan answered it; the verdict below may set the next
        if not ctx.evaluation_fits():  # a game task's evaluations count: the final one's frames come first
            record.controller = "not evaluated: the frames left are kept for the final evaluation"
            return
        frames = ctx.state.frames_used
        evaluation = iteration_evaluation(ctx)
        record.frames += ctx.state.frames_used - frames  # a game task's evaluation counts (0 for other tasks)
        record.controller = evaluation.controller + (f"; error: {evaluation.error}" if evaluation.error else "")
        record.episodes, record.failed = evaluation.episodes, evaluation.failed
        record.successes, record.links = evaluation.successes, evaluation.links
        record.score, record.achievement_rates = evaluation.score, evaluation.achievement_rates
        if not evaluation.error and evaluation.controller != NO_CONTROLLER:
            record.success_rate = evaluation.success_rate
            record.chain = task_review.chain_of(ctx)  # before keep_best may restore the best one's
            record.kept = task_review.keep_best(ctx, record)
        log.info("iteration %d: whole task %s with %s (%s)", record.iteration,
                 "not evaluated" if record.success_rate is None else
                 game_task.score_text(record.score) if ctx.game else f"{record.success_rate:.0%}",
                 record.controller, record.kept)
        if game_task.on_target(ctx.run.request.task, record.success_rate, record.score, ctx.budgets.target_success):
            return
        if self.state.outer_iteration + 1 >= ctx.budgets.max_outer_iterations or ctx.frames_left() == 0:
            return  # no iteration follows to act on a verdict
        # The next iteration's work is decided on the plan in force: the best one where keep_best rolled this
        # iteration's revision back; what the evaluation showed is then the revision's (its chain), said so.
        evaluated, plan = plan, self.state.plan_proto() or plan
        rollback = task_review.rolled_back(ctx, record)
        deaths = survival.deaths_text(ctx, evaluation.episode_summaries, evaluated,  # for a re-plan
                                      rolled_back=bool(rollback))
        pending = [s for s in plan.subtasks if self.state.subtasks[s.name].status != Status.DONE]
        if pending:  # sub-tasks that failed: the slow agent sees why, as before any whole-task verdict
            self.state.slow_feedback = survival.joined(rollback, summary(plan, self.state), deaths)
            return
        verdict = task_review.judged(ctx, plan, record, evaluation.episode_summaries, ctx.budgets.target_success)
        record.verdict = task_review.verdict_json(verdict)
        reopened = task_review.apply(ctx, plan, verdict)  # only a link of the plan in force is reopened
        if self.state.slow_feedback or rollback:  # a rolled-back revision always goes back to the slow agent
            self.state.slow_feedback = survival.joined(rollback, self.state.slow_feedback, deaths)
        ctx.run.emit(reopened, verdict=verdict)
