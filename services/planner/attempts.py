"""One attempt at a sub-task: a coded attempt (the fast agent writes skill candidates, RunSkill tests them) or an
RL attempt (the fast agent writes an RL config, the learner trains and evaluates it), then the verdict (the
critic's, or without a critic one from the measured success rate). Each attempt is recorded as a
:class:`~services.planner.state.TestRecord` and its details under ``attempts/``."""

from __future__ import annotations

import logging
from typing import Any

import grpc
from google.protobuf import json_format

from rlgpt.errors import FailedPrecondition
from rlgpt.llm.client import StructuredOutputError, record_from_json
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner.agents import FastAgent, MacroActions
from services.planner.context import AgentSetup, RunContext, StopRequested
from services.planner.plans import later_subtasks
from services.planner.state import Decision, Status, SubTaskState, TestRecord

log = logging.getLogger(__name__)
PASSING_RATE = 0.5
"""Without a critic, the measured success rate at which a sub-task counts as solved."""
JUDGE_FRAMES_PER_EPISODE = 4
"""Frames asked for per test or evaluation episode when a critic judges (it looks at them where its
RLGPT_CRITIC_ATTACH_FRAMES is on): the first observation, two between, the last."""
JUDGE_MAX_FRAMES = 8
"""Most frames one Judge request carries: the critic's default max_frames (RLGPT_CRITIC_MAX_FRAMES)."""


def training_frames(per_training: int, left: int | None, later_rl_subtasks: int) -> int:
    """Frames for one training: the per-training budget, but never more than this sub-task's share of what is
    left, so that the RL sub-tasks after it (the task's own goal is the last) still get trained when a weak plan
    starts with a side quest that never succeeds."""
    if left is None:
        return per_training
    return min(per_training, left // (1 + later_rl_subtasks))


def increasing(points: list[critic_pb2.CurvePoint]) -> list[critic_pb2.CurvePoint]:
    """Curve points with strictly increasing frames (the critic refuses repeats)."""
    out: list[critic_pb2.CurvePoint] = []
    for p in points:
        if not out or p.env_frames > out[-1].env_frames:
            out.append(p)
    return out


def measured_verdict(rollouts: list[common_pb2.EpisodeSummary],
                     errors: list[common_pb2.SkillError]) -> critic_pb2.Verdict:
    """The verdict without a critic: the agents only see the measured success rate and the first error."""
    rate = sum(e.success for e in rollouts) / len(rollouts) if rollouts else 0.0
    error = errors[0] if errors else None
    passed = rate >= PASSING_RATE
    return critic_pb2.Verdict(success=passed, success_rate=rate,
                              target=critic_pb2.TARGET_KEEP if passed else critic_pb2.TARGET_FAST,
                              diagnosis=f"success rate {rate:.0%}" + (f"; error {error.type}: {error.message}"
                                                                      if error else ""))


def judge_frames(episodes: list[common_pb2.EpisodeSummary], frames: list[env_pb2.EpisodeFrames]) -> list[bytes]:
    """Whole episodes' frames, failed episodes first (they carry the diagnosis), each episode's in step order,
    as many episodes as fit in :data:`JUDGE_MAX_FRAMES`."""
    order = sorted(range(min(len(episodes), len(frames))), key=lambda i: episodes[i].success)
    chosen: list[bytes] = []
    for i in order:
        if len(chosen) + len(frames[i].png) > JUDGE_MAX_FRAMES:
            break
        chosen.extend(frames[i].png)
    return chosen


def last_training_curve(state: SubTaskState) -> list[dict[str, Any]]:
    """The curve points of the sub-task's last attempt when that attempt was a training (none otherwise: a
    refused config or an unusable answer trained nothing)."""
    job = state.tests[-1].get("job_id", "") if state.tests else ""
    return [p for p in state.curve if p.get("job_id") == job] if job else []


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


class Attempts:
    """Runs coded and RL attempts of sub-tasks and judges them."""

    def __init__(self, ctx: RunContext, fast: FastAgent | None):
        self.ctx, self.fast = ctx, fast

    def code(self, st: planner_pb2.SubTask, state: SubTaskState,
             start: list[common_pb2.ItemCount]) -> critic_pb2.Verdict | None:
        """N skill candidates tested with RunSkill; the best is kept and judged."""
        ctx, fast = self.ctx, self._fast()
        candidates = fast.write_skill(st, iteration=ctx.state.outer_iteration, candidates=ctx.budgets.candidates,
                                      previous_code=state.skill_code, error=state.last_error,
                                      feedback=state.feedback, start_inventory=start,
                                      frames_per_episode=self._frames_per_episode())
        for c in candidates:
            if c.record is not None:
                ctx.run.llm_call(c.record, st.name)
            ctx.spend(state, sum(e.steps for e in c.episodes))
            ctx.run.emit(st.name, code=planner_pb2.CodeEvent(
                skill=st.name, code=c.answer.code if c.answer else "", candidate=c.index,
                success_rate=c.success_rate, error=c.error, frames=sum(e.steps for e in c.episodes)))
        best = candidates[0]
        error_text = f"{best.error.type} line {best.error.line}: {best.error.message}" if best.error else ""
        state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.CODE, frames=state.frames,
                                success_rate=max(0.0, best.success_rate), error=error_text))
        ctx.attempt_file(f"{st.name}_code{state.inner_iterations}", {
            "candidates": [{"index": c.index, "code": c.answer.code if c.answer else None,
                            "success_rate": c.success_rate, "error": str(c.error) if c.error else ""}
                           for c in candidates]})
        if best.answer is not None:
            state.skill_code = best.answer.code
        if best.success_rate <= 0:
            state.code_failures += 1
        return self.judge(st, Decision.CODE, list(best.episodes), code=state.skill_code,
                          errors=[best.error] if best.error else [], start=start,
                          frames=judge_frames(best.episodes, best.frames))

    def rl(self, st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount],
           plan: planner_pb2.Plan) -> critic_pb2.Verdict | None:
        """The fast agent's RL config, with the working skills joined, trained and judged.

        The macro actions the answer wrote are registered first (RegisterSkill test-runs them) under names of this
        sub-task; the accepted ones join the config's skills after the joined ones and are kept in
        ``state.macro_actions``; a refused one is left out and its error (with its line) is added to the
        verdict's diagnosis, which the loop keeps as the feedback of the next revision."""
        ctx = self.ctx
        if ctx.stubs.learner is None:
            state.feedback = "no learner is configured: RL sub-tasks cannot be trained"
            return critic_pb2.Verdict(success=False, diagnosis=state.feedback, target=critic_pb2.TARGET_SLOW)
        fast = self._fast()
        frames = training_frames(ctx.budgets.env_frames_per_training, ctx.frames_left(), sum(
            1 for name in later_subtasks(plan, st) if ctx.state.subtasks[name].decision == Decision.RL
            and ctx.state.subtasks[name].status != Status.DONE))
        previous = json_format.ParseDict(state.rl_config, learner_pb2.RLConfig()) if state.rl_config else None
        try:
            answer = fast.write_rl(st, env_frames=frames, iteration=ctx.state.outer_iteration, previous=previous,
                                   feedback=state.feedback, start_inventory=start,
                                   previous_macros=state.macro_actions, curve=last_training_curve(state))
        except StructuredOutputError as exc:
            # An unusable answer is a failed attempt with feedback, not the end of the run.
            state.feedback = str(exc)
            if exc.record is not None:
                ctx.run.llm_call(exc.record, st.name)
            state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.RL, error=str(exc)[:500],
                                    frames=state.frames))
            return None
        if answer.record is not None:  # None: no LLM call of its own (an answer written earlier)
            ctx.run.llm_call(answer.record, st.name)
        config = answer.config
        # The macro actions written for this sub-task join its action space once the env server accepted them.
        macros = fast.register_macro_actions(st, answer.macro_actions)
        self._emit_macros(st, macros)
        joined_skills(config, st, plan, ctx, macros=list(macros.accepted))
        del config.task.start_inventory[:]
        config.task.start_inventory.extend(start)
        state.macro_actions = dict(macros.accepted)
        state.rl_config = json_format.MessageToDict(config, preserving_proto_field_name=True)
        verdict = self.train(st, state, config, start, details={
            "macro_actions": [{"name": name, "code": code} for name, code in macros.accepted.items()],
            "refused_macro_actions": [{"name": name, "code": macro.code, "error": f"{error.type}: {error.message}"}
                                      for name, macro, error in macros.refused]})
        refused = macros.feedback()
        if refused:  # the next revision must see why its macro action is missing
            if verdict is not None:
                verdict.diagnosis = f"{verdict.diagnosis} {refused}".strip()
            else:
                state.feedback = f"{state.feedback} {refused}".strip()
        return verdict

    def _emit_macros(self, st: planner_pb2.SubTask, macros: MacroActions) -> None:
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
        """One training (the learner defaults what the config leaves at 0), its evaluation and the verdict.
        ``details``: more for the attempt's file (the macro actions of the config)."""
        ctx, learner = self.ctx, self.ctx.stubs.learner
        if learner is None:
            raise FailedPrecondition(f"{st.name} needs training and this planner has no learner")
        ctx.run.emit(st.name, config=config)
        try:
            job_id = learner.StartTraining(learner_pb2.StartTrainingRequest(config=config)).job_id
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                state.feedback = f"the learner refused the config: {exc.details()}"
                state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.RL,
                                        error=state.feedback, frames=state.frames))
                ctx.attempt_file(f"{st.name}_rl{state.inner_iterations}", {**(details or {}),
                                                                           "error": state.feedback})
                return None
            raise
        state.job_id = job_id
        ctx.save()
        curve: list[dict[str, float]] = []
        final = None
        for progress in learner.WatchJob(learner_pb2.WatchJobRequest(job_id=job_id), timeout=24 * 3600):
            if ctx.run.stop_requested.is_set():
                learner.StopJob(learner_pb2.StopJobRequest(job_id=job_id))
                raise StopRequested()
            curve.append({"env_frames": progress.env_frames, "success_rate": progress.success_rate,
                          "mean_return": progress.mean_return})
            ctx.run.emit(st.name, training=progress)
            final = progress
        # Every training of the sub-task stays on its curve, on the frames the sub-task had spent by then.
        state.curve.extend({**point, "env_frames": state.frames + point["env_frames"],
                            "training_frames": point["env_frames"], "job_id": job_id,
                            "iteration": ctx.state.outer_iteration} for point in curve)
        ctx.spend(state, final.env_frames if final else 0)
        if final is None or final.state != learner_pb2.JOB_STATE_SUCCEEDED:
            message = final.message if final else "no progress"
            state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.RL, error=message,
                                    frames=state.frames, job_id=job_id))
            raise FailedPrecondition(f"training of {st.name} (job {job_id}) did not finish: {message}; resume with "
                                     "--resume once the failed service is back")
        evaluation = learner.Evaluate(learner_pb2.EvaluateRequest(
            job_id=job_id, episodes=ctx.budgets.eval_episodes, seed=ctx.seed,
            frames_per_episode=self._frames_per_episode()), timeout=3600)
        state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.RL, job_id=job_id,
                                success_rate=evaluation.success_rate, frames=state.frames))
        ctx.attempt_file(f"{st.name}_rl{state.inner_iterations}", {
            **(details or {}), "job_id": job_id, "env_frames": config.env_frames, "curve": curve,
            "evaluation_success_rate": evaluation.success_rate})
        points = [critic_pb2.CurvePoint(env_frames=int(p["env_frames"]), success_rate=p["success_rate"],
                                        mean_return=p["mean_return"]) for p in curve]
        return self.judge(st, Decision.RL, list(evaluation.episodes), curve=increasing(points), start=start,
                          env_frames=config.env_frames,
                          frames=judge_frames(list(evaluation.episodes), list(evaluation.frames)))

    def _critic_judges(self) -> bool:
        return self.ctx.stubs.critic is not None and self.ctx.agents == AgentSetup.SLOW_FAST_CRITIC

    def _frames_per_episode(self) -> int:
        """Frames to ask RunSkill and Evaluate for: some when a critic judges (it decides whether it looks at
        them), none otherwise; never more than the env server's limit (Describe's ServerLimits)."""
        if not self._critic_judges():
            return 0
        return min(JUDGE_FRAMES_PER_EPISODE, self.ctx.describe.limits.max_frames_per_episode)

    def judge(self, st: planner_pb2.SubTask, decision: Decision, rollouts: list[common_pb2.EpisodeSummary], *,
              code: str = "", errors: list[common_pb2.SkillError] | None = None,
              curve: list[critic_pb2.CurvePoint] | None = None, start: list[common_pb2.ItemCount] | None = None,
              env_frames: int | None = None, frames: list[bytes] | None = None) -> critic_pb2.Verdict:
        """The critic's verdict; without a critic (or in a setup without one), :func:`measured_verdict`."""
        ctx = self.ctx
        if not self._critic_judges():
            return measured_verdict(rollouts, errors or [])
        response = ctx.stubs.critic.Judge(critic_pb2.JudgeRequest(
            subtask=st.name, description=st.description, success=list(st.success), rollouts=rollouts[:64],
            code=code[:60000], errors=(errors or [])[:64], curve=(curve or [])[-2000:], decision=str(decision),
            rules=ctx.describe.rules, start_inventory=start or [], frames=frames or [],
            test_protocol=ctx.protocol.judge_text(str(decision), list(start or []), env_frames)), timeout=600)
        if response.llm_record:
            try:
                ctx.run.llm_call(record_from_json(response.llm_record), st.name)
            except ValueError as exc:  # a critic of another version: the verdict still counts
                log.warning("critic's LLM record of %s is unreadable: %s", st.name, exc)
        return response.verdict

    def _fast(self) -> FastAgent:
        if self.fast is None:
            raise FailedPrecondition("this planner has no LLM: only mode=pure-rl can run")
        return self.fast
