"""One attempt at a sub-task: a coded attempt (the fast agent writes skill candidates, RunSkill tests them) or an
RL attempt (the fast agent writes an RL config, the learner trains and evaluates it), then the verdict (the
critic's, or without a critic one from the measured success rate: :mod:`services.planner.judging`). Each attempt
is recorded as a :class:`~services.planner.state.TestRecord` and its details under ``attempts/``; an RL attempt's
training is :mod:`services.planner.trainings`'."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from typing import Any

import grpc
from google.protobuf import json_format

from rlgpt.errors import FailedPrecondition
from rlgpt.llm.client import StructuredOutputError
from rlgpt.v1 import common_pb2, critic_pb2, learner_pb2, planner_pb2
from services.planner.agents.answers import MacroActions, SkillCandidate, WritesAnswers
from services.planner.answer_forms import rl_config_answer
from services.planner.context import AgentSetup, RunContext
from services.planner.controller import coded_skills, policy_of, register_chain_skills
from services.planner.judging import frames_per_episode, increasing, judge, judge_frames
from services.planner.program_code import program_of
from services.planner.state import Decision, Status, SubTaskState, TestRecord
from services.planner.trainings import Trained, Training

log = logging.getLogger(__name__)


def training_frames(per_training: int, left: int | None, sharing: int = 1) -> int:
    """Frames for one training: the per-training budget, but never more than its equal share of what is left
    among the ``sharing`` trainings of its round (all the RL sub-tasks of the outer iteration still training,
    this one included), so that concurrent trainings together never overspend the run's budget and a weak plan's
    side quest that never succeeds leaves frames for the task's own goal."""
    if left is None:
        return per_training
    return min(per_training, left // max(1, sharing))


MAX_ERRORS_SHOWN = 3
"""Distinct candidate errors the next attempt sees."""


def error_line(error: common_pb2.SkillError) -> str:
    return f"{error.type} line {error.line}: {error.message}"


def candidate_errors(candidates: list[SkillCandidate]) -> str:
    """The errors the next attempt sees: the best candidate's, then the other candidates' distinct ones (so the
    failures of N verified candidates all feed the revision), at most :data:`MAX_ERRORS_SHOWN`."""
    seen: list[str] = []
    for c in candidates:
        if c.error is not None and (text := error_line(c.error)) not in seen:
            seen.append(text)
    if len(seen) <= 1:
        return seen[0] if seen else ""
    return " | ".join(f"candidate error: {text}" for text in seen[:MAX_ERRORS_SHOWN])


def last_training_curve(state: SubTaskState) -> list[dict[str, Any]]:
    """The curve points of the sub-task's last attempt when that attempt was a training (none otherwise: a
    refused config or an unusable answer trained nothing)."""
    job = state.tests[-1].get("job_id", "") if state.tests else ""
    return [p for p in state.curve if p.get("job_id") == job] if job else []


def replaced_text(replaced: SubTaskState) -> str:
    """What a renamed link's first attempt is told of the link it replaces (SubTaskState.replaces), whose code it is
    shown as the previous code: the slow agent asked for it to be written again, not from nothing."""
    said = f" Its last critic feedback: {replaced.feedback}" if replaced.feedback else ""
    return (f"This sub-task replaces {replaced.name} in the plan (the same success conditions, another name and "
            f"description): the previous code above is {replaced.name}'s, which the chain ran (its last test success "
            f"{replaced.success_rate:.0%}). Keep what works in it and change what this sub-task's description asks "
            f"for.{said}")


def chain_prefix(ctx: RunContext, plan: planner_pb2.Plan, st: planner_pb2.SubTask, *,
                 behind_failed: bool = False) -> list[common_pb2.PrefixStep]:
    """The plan's links before ``st`` as the env server's prefix of its episodes (each its code until its conditions
    hold, for as many frames as its tests had), registered under the chain's names; empty when ``st`` is first or an
    earlier link has no code (the env server cannot run a policy) or is not done, unless ``behind_failed``.

    ``behind_failed``: code that failed its own tests runs too, as the whole task's chain runs it (handing over when
    its conditions hold, else after its frames). A code test (a few episodes) then sees what the chain hands over; a
    training is not given it, as thousands of its episodes would wait behind a link that seldom hands over
    (inner_loops.alone_text)."""
    earlier = []
    for other in plan.subtasks:
        if other.name == st.name:
            break
        earlier.append(other)
    codes, subs = dict(coded_skills(plan, ctx.state)), ctx.state.subtasks
    if not earlier or any(other.name not in codes or not (behind_failed or subs[other.name].status == Status.DONE)
                          for other in earlier):
        return []
    try:
        names = register_chain_skills(ctx, [(other.name, codes[other.name]) for other in earlier])
    except grpc.RpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise
        log.warning("%s trains without its chain's prefix: %s", st.name, exc.details())
        return []
    return [common_pb2.PrefixStep(skill=names[other.name], success=list(other.success),
                                  max_frames=ctx.settings.test_steps) for other in earlier]


def prefix_names(plan: planner_pb2.Plan, prefix: list[common_pb2.PrefixStep]) -> list[str]:
    """The sub-tasks a :func:`chain_prefix` runs, by name (what the agents and the critic are told)."""
    return [other.name for other in plan.subtasks[:len(prefix)]]


def joined_skills(config: learner_pb2.RLConfig, subtask: planner_pb2.SubTask, plan: planner_pb2.Plan,
                  ctx: RunContext, macros: list[str] | tuple[str, ...] = ()) -> None:
    """Skills that work join the RL action space (RL-GPT's key mechanism): the library skills the plan suggested
    for this sub-task (the slow agent was told they would), then the coded earlier sub-tasks of the plan, then
    ``macros``, the registered names of the macro actions the fast agent wrote for this sub-task."""
    working = [s.name for s in ctx.library.all() if s.success_rate > 0]
    config.skills.extend(name for name in subtask.skills if name in working and name not in config.skills)
    for name in (s.name for s in plan.subtasks):
        if name == subtask.name:
            break
        earlier = ctx.state.subtasks.get(name)
        if earlier and earlier.status == Status.DONE and earlier.decision == Decision.CODE and name in working \
                and name not in config.skills:
            config.skills.append(name)
    config.skills.extend(name for name in dict.fromkeys(macros) if name not in config.skills)
    if config.skills and config.skill_max_steps <= 1:
        config.skill_max_steps = 0  # one frame per skill is no macro action: K is the learner's default


@dataclasses.dataclass
class RLAttempt:
    """One RL attempt of a sub-task, carried through its three steps (:meth:`Attempts.configure`,
    :meth:`Attempts.train_and_evaluate`, :meth:`Attempts.verdict`)."""

    st: planner_pb2.SubTask
    state: SubTaskState
    start: list[common_pb2.ItemCount]
    config: learner_pb2.RLConfig | None = None
    """What to train; None: nothing (an unusable answer, no learner)."""
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    """More for the attempt's file (its macro actions, accepted and refused)."""
    refused: str = ""
    """Why macro actions of the answer were refused (with their lines), for the verdict's diagnosis."""
    verdict: critic_pb2.Verdict | None = None
    """A verdict known without training (no learner: back to the slow agent)."""
    after: list[str] = dataclasses.field(default_factory=list)
    """The earlier sub-tasks whose skills run first in every episode (the chain's prefix); empty: none."""
    trained: Trained | None = None


class Attempts:
    """Runs coded and RL attempts of sub-tasks and judges them."""

    def __init__(self, ctx: RunContext, fast: WritesAnswers | None):
        self.ctx, self.fast = ctx, fast

    def code(self, st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount],
             plan: planner_pb2.Plan) -> critic_pb2.Verdict | None:
        """N skill candidates tested with RunSkill where the chain hands over (behind its earlier links, when they
        are coded, done or not: :func:`chain_prefix`; from ``start`` otherwise); the best is kept and judged. The one
        agent's skills, all written in one answer whose prompt says tests start from the earlier sub-tasks' items,
        are tested from ``start``."""
        ctx, fast = self.ctx, self._fast()
        prefix = chain_prefix(ctx, plan, st, behind_failed=True) if ctx.agents is not AgentSetup.ONE else []
        after = prefix_names(plan, prefix)
        if prefix:
            start = []  # the earlier links hand over what they made
        # Each LLM call is recorded as its answer comes, before its test: a service that dies during the test
        # pauses the run, and the call still counts (a resume asks again).
        previous_code, feedback = state.refused_code or state.skill_code, state.feedback
        if not previous_code and (replaced := ctx.state.subtasks.get(state.replaces)) is not None:
            previous_code, feedback = replaced.skill_code, replaced_text(replaced)
        candidates = fast.write_skill(st, iteration=ctx.state.outer_iteration, candidates=ctx.budgets.candidates,
                                      previous_code=previous_code, error=state.last_error,
                                      feedback=feedback, start_inventory=start,
                                      frames_per_episode=frames_per_episode(ctx), prefix=prefix, after=after,
                                      on_call=lambda record: ctx.run.llm_call(record, st.name))
        for c in candidates:
            ctx.spend(state, sum(e.steps for e in c.episodes))
            ctx.run.emit(st.name, code=planner_pb2.CodeEvent(
                skill=st.name, code=c.answer.code if c.answer else "", candidate=c.index,
                success_rate=c.success_rate, error=c.error, frames=sum(e.steps for e in c.episodes)))
        best = candidates[0]
        error_text = candidate_errors(candidates)
        state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.CODE, frames=state.frames,
                                success_rate=max(0.0, best.success_rate), error=error_text))
        ctx.attempt_file(f"{st.name}_code{state.inner_iterations}", {
            "candidates": [{"index": c.index, "code": c.answer.code if c.answer else None,
                            **({"program": program_of(c.answer.code)} if c.answer and program_of(c.answer.code)
                               else {}),
                            "success_rate": c.success_rate, "error": str(c.error) if c.error else ""}
                           for c in candidates]})
        if best.answer is not None and best.success_rate < 0:  # refused untested: the chain keeps tested code
            state.refused_code = best.answer.code
        elif best.answer is not None:
            state.skill_code, state.refused_code = best.answer.code, ""
        if best.success_rate <= 0:
            state.code_failures += 1
        return judge(ctx, st, Decision.CODE, list(best.episodes),
                     code=best.answer.code if best.answer is not None else state.skill_code,
                     errors=[best.error] if best.error else [], start=start,
                     frames=judge_frames(best.episodes, best.frames), after=after)

    # --- RL attempts: configure (fast agent), train and evaluate (learner; thread-safe), verdict ---------------
    def rl(self, st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount],
           plan: planner_pb2.Plan) -> critic_pb2.Verdict | None:
        """One RL attempt of one sub-task, its three steps in a row (the loops run each step for a round of RL
        sub-tasks: :meth:`configure` in plan order, :meth:`train_and_evaluate` in threads, :meth:`verdict` in plan
        order)."""
        attempt = self.configure(st, state, start, plan)
        self.train_and_evaluate(attempt)
        return self.verdict(attempt)

    def configure(self, st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount],
                  plan: planner_pb2.Plan, *, env_frames: int | None = None) -> RLAttempt:
        """Step 1: the fast agent's RL config (an LLM call), with the working skills joined.

        ``env_frames``: the offer of frames, the most it trains for (a round's share, :func:`training_frames`);
        None: the per-training budget within what is left of the run's frames. The macro actions the answer wrote
        are registered (RegisterSkill test-runs them) under names of this sub-task; the accepted ones join the
        config's skills after the joined ones and are kept in ``state.macro_actions``; a refused one is left out
        and its error (with its line) goes into the verdict's diagnosis, which the loop keeps as the feedback of
        the next revision. Without a learner the attempt has its verdict at once (back to the slow agent); an
        unusable answer is an attempt with nothing to train and no verdict."""
        ctx = self.ctx
        attempt = RLAttempt(st, state, list(start))
        if ctx.stubs.learner is None:
            state.feedback = "no learner is configured: RL sub-tasks cannot be trained"
            attempt.verdict = critic_pb2.Verdict(success=False, diagnosis=state.feedback,
                                                 target=critic_pb2.TARGET_SLOW)
            return attempt
        fast = self._fast()
        frames = env_frames if env_frames is not None else \
            training_frames(ctx.budgets.env_frames_per_training, ctx.frames_left())
        previous = json_format.ParseDict(state.rl_config, learner_pb2.RLConfig()) if state.rl_config else None
        prefix = chain_prefix(ctx, plan, st)  # train where the chain hands over (empty: from the start items)
        attempt.after = prefix_names(plan, prefix)
        try:
            answer = fast.write_rl(st, env_frames=frames, iteration=ctx.state.outer_iteration, previous=previous,
                                   feedback=state.feedback, start_inventory=start,
                                   previous_macros=state.macro_actions, curve=last_training_curve(state),
                                   after=attempt.after)
        except StructuredOutputError as exc:
            # An unusable answer is a failed attempt with feedback, not the end of the run.
            state.feedback = str(exc)
            if exc.record is not None:
                ctx.run.llm_call(exc.record, st.name)
            state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.RL, error=str(exc)[:500],
                                    frames=state.frames))
            return attempt
        if answer.record is not None:  # None: no LLM call of its own (an answer written earlier)
            ctx.run.llm_call(answer.record, st.name)
        config = answer.config
        # The macro actions written for this sub-task join its action space once the env server accepted them.
        macros = fast.register_macro_actions(st, answer.macro_actions)
        self.emit_macros(st, macros)
        joined_skills(config, st, plan, ctx, macros=list(macros.accepted))
        del config.task.start_inventory[:], config.prefix[:]
        if prefix:
            config.prefix.extend(prefix)
        else:  # an earlier link has no code yet (or is a policy): its items are given instead
            config.task.start_inventory.extend(start)
        if state.job_id:  # a revision goes on from the best policy it has (a fresh network if the spaces changed)
            config.init_from_job = policy_of(state)
        state.reopened = False
        state.macro_actions = dict(macros.accepted)
        state.rl_config = json_format.MessageToDict(config, preserving_proto_field_name=True)
        attempt.config, attempt.refused = config, macros.feedback()
        attempt.details = {
            "macro_actions": [{"name": name, "code": code} for name, code in macros.accepted.items()],
            "refused_macro_actions": [{"name": name, "code": macro.code, "error": f"{error.type}: {error.message}"}
                                      for name, macro, error in macros.refused]}
        return attempt

    def emit_macros(self, st: planner_pb2.SubTask, macros: MacroActions) -> None:
        """Each macro action the fast agent wrote, emitted as coded skills are: its registered name, code, index in
        the answer, and the env server's refusal (success_rate -1, as for a skill that failed to register); an
        accepted one has success_rate 0 (it is not tested on the sub-task: the policy learns when to use it)."""
        for index, (name, macro, error) in enumerate(macros.outcomes):
            self.ctx.run.emit(st.name, code=planner_pb2.CodeEvent(
                skill=name, code=macro.code, candidate=index, success_rate=-1.0 if error is not None else 0.0,
                error=error))

    def train(self, st: planner_pb2.SubTask, state: SubTaskState, config: learner_pb2.RLConfig,
              start: list[common_pb2.ItemCount] | None = None, *,
              details: dict[str, Any] | None = None) -> critic_pb2.Verdict | None:
        """One training of ``config`` (the learner defaults what it leaves at 0), its evaluation and the verdict:
        steps 2 and 3 (pure RL's one attempt). ``details``: more for the attempt's file."""
        attempt = RLAttempt(st, state, list(start or []), config=config, details=dict(details or {}))
        self.train_and_evaluate(attempt)
        return self.verdict(attempt)

    def train_and_evaluate(self, attempt: RLAttempt, halt: threading.Event | None = None,
                           eval_seed: int | None = None) -> None:
        """Step 2: the attempt's training watched to its end, then its evaluation (``attempt.trained``); nothing
        when it has no config (:class:`~services.planner.trainings.Training`: thread-safe, so it runs in a thread
        of its own next to other sub-tasks'; a stop or ``halt`` raises StopRequested); ``eval_seed``: the worlds
        of its evaluation, if not the sub-tasks' held-out ones."""
        if attempt.config is None:
            return
        attempt.trained = Training(self.ctx, attempt.st, attempt.state, attempt.config, attempt.details,
                                   halt, eval_seed).run(frames_per_episode(self.ctx))

    def verdict(self, attempt: RLAttempt) -> critic_pb2.Verdict | None:
        """Step 3: the verdict on a trained attempt (the critic's, an LLM call: one after another in plan order),
        the one it had without training, or None (nothing was trained). The refused macro actions' errors join
        the diagnosis, or the feedback where there is no verdict: the next revision must see why one is
        missing."""
        verdict = attempt.verdict
        if attempt.trained is not None:
            trained, config = attempt.trained, attempt.config
            points = [critic_pb2.CurvePoint(env_frames=int(p["env_frames"]), success_rate=p["success_rate"],
                                            mean_return=p["mean_return"]) for p in trained.curve]
            episodes = list(trained.evaluation.episodes)
            verdict = judge(self.ctx, attempt.st, Decision.RL, episodes, curve=increasing(points), start=attempt.start,
                            after=attempt.after,
                                 env_frames=config.env_frames if config else None,
                                 frames=judge_frames(episodes, list(trained.evaluation.frames)),
                                 rl_config=json.dumps(rl_config_answer(config, attempt.state.macro_actions))
                                 if config else "")
        if attempt.refused:
            if verdict is not None:
                verdict.diagnosis = f"{verdict.diagnosis} {attempt.refused}".strip()
            else:
                attempt.state.feedback = f"{attempt.state.feedback} {attempt.refused}".strip()
        return verdict

    def _fast(self) -> WritesAnswers:
        if self.fast is None:
            raise FailedPrecondition("this planner has no LLM: only mode=pure-rl can run")
        return self.fast
