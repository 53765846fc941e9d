"""RL inside the chain: when every sub-task of the plan has a controller (its code or its trained policy, a link still
below its bar included) but the whole task's chain still fails in some worlds, the run trains a policy around the
plan instead of letting RL re-learn it. The plan becomes one macro action (``RLConfig.plan``: its sub-tasks'
controllers in order, each until its success holds: a coded sub-task's skill, an RL sub-task's trained policy, the
one its chain link runs, pinned by its job id) next to the primitives, and the policy learns when to let it act and
when to step in: what kills the chain, which the plan's controllers leave out. The plan's order is never re-learned.

The fast agent configures that training (:mod:`services.planner.agents.kept_plan`): told where and how the chain's
failed episodes ended, it chooses the primitives, writes macro actions (tested and registered like an RL
sub-task's), K and reward terms; the planner pays the plan's stages and the task's success itself. Without a fast
agent of its own (the one-agent setup), or when its answer is unusable, the planner's defaults train.

The policy and the plan alone (``EvaluateRequest.plan_alone``) are scored on the same worlds; the final controller
is the policy only if it did better there (``final_controller``). When it did not, the fast agent revises its
config, told its answer, the learning curve, the macro actions refused and both scores on worlds of the revision's
own (``revision_of``, up to ``kept_plan_revisions`` times), and the revised config trains with the frames kept for
it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

import grpc

from rlgpt import worlds
from rlgpt.llm.client import StructuredOutputError
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner.action_space import SUCCESS_REWARD
from services.planner.agents.kept_plan import (
    KeptPlanAnswer,
    KeptPlanRevision,
    answer_form,
    apply_answer,
    write_kept_plan,
)
from services.planner.agents.texts import choices_text, curve_text, last_shares
from services.planner.answer_forms import macro_short_name
from services.planner.attempts import Attempts, RLAttempt
from services.planner.context import AgentSetup, Mode, RunContext
from services.planner.controller import evaluation_seconds, learner_evaluation, policy_of
from services.planner.game_task import on_target
from services.planner.schemas import KEPT_PLAN_OWN_KINDS
from services.planner.state import Decision, FinalResult, Status, SubTaskState
from services.planner.trainings import MIN_FRAMES

log = logging.getLogger(__name__)
KEPT_PLAN_K = 16
"""Frames of one plan action: how often the policy may step in (the plan's skill is suspended, not restarted)."""
KEPT_PLAN_PRIOR = 0.8
"""The untrained policy's probability of the plan action (``RLConfig.plan_prior``): it starts near the chain
alone, whose order it should keep, and explores steps away from the plan rather than a random walk (on
collect_diamond, make bench-diamond: training success began at 15% with a prior of 0.9, at 5.5% without)."""
OWN_REWARD = (("stage", 1.0, ""), ("success", SUCCESS_REWARD, ""))
"""Paid in every training around a kept plan: each sub-task the plan gets done pays 1, the task as much as pure
RL's success."""
DEFAULT_REWARD = (("death", -1.0, ""), ("health", 0.1, ""))
"""Without the fast agent's terms: dying costs 1, and health lost or regained counts a little, so that damage is
felt when it happens, not only at death."""


def kept_plan_name(task: str) -> str:
    return f"{task[:60]}__kept_plan"


def trained(sub: SubTaskState) -> bool:
    """Whether a sub-task's controller is a trained policy (an RL sub-task with a training), not its code."""
    return sub.decision == Decision.RL and bool(sub.job_id)


def wanted(ctx: RunContext, plan: planner_pb2.Plan | None, chain_success: float | None) -> bool:
    """Every sub-task with a controller (its code, or its trained policy; a link still below its bar too: RL around
    the plan is where the method helps such a link, issue 35), the chain evaluated and below the run's target, a
    learner and frames to train."""
    if ctx.mode != Mode.RL_GPT or ctx.stubs.learner is None or not ctx.settings.keep_plan or plan is None:
        return False
    if ctx.state.kept_plan is not None or chain_success is None or chain_success >= 1.0:
        return False
    if on_target(ctx.run.request.task, chain_success, None, ctx.budgets.target_success):
        return False  # the run ends when the whole task reaches its target (issue 35): nothing left to lift
    subs = [ctx.state.subtasks[st.name] for st in plan.subtasks]
    if not subs or not all(trained(s) or s.skill_code for s in subs):
        return False
    left = ctx.frames_left()
    return left is None or left >= MIN_FRAMES


def kept_step_name(ctx: RunContext, subtask: str) -> str:
    """The name a coded sub-task's code is registered under as a step of this run's kept plan."""
    return f"{subtask[:40]}__kept{ctx.run.id[-6:]}"


def kept_plan_config(ctx: RunContext, plan: planner_pb2.Plan, trainings: int = 1) -> learner_pb2.RLConfig:
    """The plan's sub-tasks as the steps of a kept plan: a trained one's policy (the job its chain link runs), a
    coded one's code registered under a name of this run; the frames left shared by the ``trainings`` (this one and
    the revisions that may follow) while each gets MIN_FRAMES."""
    task = ctx.run.request.task
    steps = []
    for st in plan.subtasks:
        if trained(sub := ctx.state.subtasks[st.name]):
            steps.append(learner_pb2.PlanStep(job_id=policy_of(sub), success=list(st.success)))
            continue
        name = kept_step_name(ctx, st.name)
        ctx.stubs.env.RegisterSkill(env_pb2.RegisterSkillRequest(
            name=name, code=sub.skill_code, replace=True,
            description=f"{st.name}: its code as a step of the run's kept plan"))
        steps.append(learner_pb2.PlanStep(skill=name, success=list(st.success)))
    left = ctx.frames_left()
    return learner_pb2.RLConfig(
        name=kept_plan_name(task.name), plan=steps, skill_max_steps=KEPT_PLAN_K, plan_prior=KEPT_PLAN_PRIOR,
        seed=ctx.seed,
        task=common_pb2.TaskSpec(name=task.name, success=list(task.success), terminate_on_success=True),
        reward_terms=[common_pb2.RewardTerm(kind=k, weight=w, target=t) for k, w, t in OWN_REWARD + DEFAULT_REWARD],
        episode_length=ctx.settings.final_episode_frames,
        env_frames=ctx.budgets.env_frames_per_training if left is None else
        left // trainings if left >= trainings * MIN_FRAMES else left)


def own_reward_text() -> str:
    stage, success = (w for _, w, _ in OWN_REWARD)
    return (f"{stage:+g} each time a sub-task of the plan is first done in an episode, and {success:+g} when the "
            "task succeeds")


def configure(ctx: RunContext, attempts: Attempts, plan: planner_pb2.Plan, st: planner_pb2.SubTask,
              state: SubTaskState, chain_success: float, failed: list[dict[str, Any]],
              revision: KeptPlanRevision | None = None) -> RLAttempt:
    """The training's config: the planner's own (the plan, its stages' and the task's reward, every primitive,
    K=16, dying and health terms), the fast agent's answer in place of the last four (:func:`configured`)."""
    fast = fast_agent(ctx, attempts)
    number = 0 if revision is None else (ctx.state.kept_plan or {}).get("revision", 0) + 1  # of this training
    may_follow = 0 if fast is None else max(0, ctx.settings.kept_plan_revisions - number)  # revisions after it
    config = kept_plan_config(ctx, plan, 1 + may_follow)
    return configured(ctx, attempts, st, state, config, {"kept_plan": True}, lambda fast: write_kept_plan(
        fast, ctx.run.request.task, told_plan(ctx, plan), success_rate=chain_success, failed=failed,
        env_frames=config.env_frames, own_reward=own_reward_text(), iteration=ctx.state.outer_iteration,
        revision=revision))


def fast_agent(ctx: RunContext, attempts: Attempts) -> Any:
    """The fast agent that configures a training around a kept plan; None (none, or the one-agent setup): none."""
    return None if ctx.agents is AgentSetup.ONE else attempts.fast


def told_plan(ctx: RunContext, plan: planner_pb2.Plan) -> planner_pb2.Plan:
    """The plan as the kept plan runs it, as the fast agent is told it: its trained sub-tasks by their policies."""
    told = planner_pb2.Plan()
    told.CopyFrom(plan)
    for sub in told.subtasks:
        sub.decision = planner_pb2.DECISION_RL if trained(ctx.state.subtasks[sub.name]) else planner_pb2.DECISION_CODE
    return told


def configured(ctx: RunContext, attempts: Attempts, st: planner_pb2.SubTask, state: SubTaskState,
               config: learner_pb2.RLConfig, details: dict[str, Any], ask: Callable[[Any], KeptPlanAnswer],
               own_kinds: Collection[str] = KEPT_PLAN_OWN_KINDS) -> RLAttempt:
    """A training around a kept plan: ``config`` with the fast agent's answer (``ask``: its one LLM call) applied
    (``own_kinds``: the config's terms always paid) and its macro actions registered (a refused one left out, its
    error in the details). No fast agent, or an unusable answer: ``config`` as it is, the details say why."""
    fast, details["config_by"] = fast_agent(ctx, attempts), "planner defaults"
    try:
        answer = None if fast is None else ask(fast)
    except StructuredOutputError as exc:  # an unusable answer: the defaults train, and the run says why
        if exc.record is not None:
            ctx.run.llm_call(exc.record, st.name)
        details["config_error"], answer = str(exc)[:500], None
        log.warning("kept plan: the fast agent's config was unusable (%s); the planner's defaults train", exc)
    if answer is None:
        return RLAttempt(st, state, [], config=config, details=details)
    if answer.record is not None:
        ctx.run.llm_call(answer.record, st.name)
    macros = fast.register_macro_actions(st, answer.macro_actions)
    attempts.emit_macros(st, macros)
    apply_answer(config, answer, list(macros.accepted), own_kinds)
    state.macro_actions = dict(macros.accepted)  # registered again on resume, as an RL sub-task's are
    details.update(config_by="fast agent", answer=answer_form(answer), macro_actions=list(macros.accepted),
                   refused_macro_actions=[{"name": name, "error": f"{error.type}: {error.message}"}
                                          for name, _, error in macros.refused])
    return RLAttempt(st, state, [], config=config, details=details)


def train_kept_plan(ctx: RunContext, attempts: Attempts, plan: planner_pb2.Plan, chain_success: float,
                    failed: list[dict[str, Any]] | None = None, revision: KeptPlanRevision | None = None) -> None:
    """Trains the policy around the plan; scores it and the plan alone on the same worlds and keeps both in the
    state (``kept_plan``). ``failed``: the chain's failed episodes after the iteration (what the fast agent is
    told); ``revision``: the fast agent revises its previous config (that training's record goes to the new
    one's ``earlier``). A refused config or a failed evaluation is logged and recorded, and the chain stays."""
    task = ctx.run.request.task
    name = kept_plan_name(task.name)
    st = planner_pb2.SubTask(name=name, success=list(task.success), decision=planner_pb2.DECISION_RL,
                             description="RL around the kept plan: the plan is one macro action")
    state = ctx.state.subtasks.setdefault(name, SubTaskState(name=name, decision=Decision.RL))
    record: dict[str, Any] = {"chain_success_rate": chain_success}
    if revision is not None and ctx.state.kept_plan:
        previous = ctx.state.kept_plan
        record.update(revision=previous.get("revision", 0) + 1, earlier=[
            *previous.get("earlier", []), {k: v for k, v in previous.items() if k != "earlier"}])
    try:
        attempt = configure(ctx, attempts, plan, st, state, chain_success, list(failed or []), revision)
        assert attempt.config is not None
        record.update({k: v for k, v in attempt.details.items() if k != "kept_plan"},
                      skill_max_steps=attempt.config.skill_max_steps,
                      primitive_actions=list(attempt.config.primitive_actions),
                      reward_terms=[{"kind": t.kind, "target": t.target, "weight": round(t.weight, 4)}
                                    for t in attempt.config.reward_terms])
        attempts.train_and_evaluate(attempt)
        if attempt.trained is None:
            record["error"] = "the learner refused the kept plan's training: " + (state.last_error or state.feedback)
        else:
            # The plan alone on the worlds the policy was just evaluated on (the attempt's own request).
            job_id, policy = attempt.trained.job_id, attempt.trained.evaluation
            alone_asked = learner_pb2.EvaluateRequest(
                job_id=job_id, episodes=attempt.trained.asked.episodes, seed=attempt.trained.asked.seed,
                episode_length=attempt.trained.asked.episode_length, plan_alone=True)
            alone = ctx.stubs.learner.Evaluate(alone_asked, timeout=evaluation_seconds(
                ctx, alone_asked, attempt.config.episode_length))
            record.update(job_id=job_id, success_rate=policy.success_rate,
                          plan_alone_success_rate=alone.success_rate, episodes=attempt.trained.asked.episodes,
                          curve=[{k: p[k] for k in ("env_frames", "success_rate", "mean_return", "action_shares")
                                  if k in p} for p in attempt.trained.curve],
                          config_name=attempt.config.name)
            state.status, state.success_rate = Status.DONE, policy.success_rate
    except grpc.RpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise  # the learner or env server is gone: the run pauses, resumable
        record["error"] = f"{exc.code().name}: {exc.details()}"
    ctx.state.kept_plan = record
    log.info("kept plan: %s", record)
    ctx.save()


def revision_of(ctx: RunContext) -> KeptPlanRevision | None:
    """The fast agent's next revision of its config around the plan, or None: the last training's policy beat the
    plan alone, or that training had no answer of the fast agent's, or the revisions (``kept_plan_revisions``) or
    the frames are spent, or its briefing could not be scored. The briefing (:func:`brief`) is scored once and kept
    with the training's record, so a resume tells the same."""
    kept = ctx.state.kept_plan or {}
    if not kept.get("answer") or not kept.get("job_id") or final_controller(ctx) is not None:
        return None
    left = ctx.frames_left()
    if kept.get("revision", 0) >= ctx.settings.kept_plan_revisions or (left is not None and left < MIN_FRAMES):
        return None
    if "briefing" not in kept:
        kept["briefing"] = brief(ctx, kept)
        ctx.save()
    if kept["briefing"].get("error"):
        return None
    return KeptPlanRevision(kept["answer"], outcome_text(kept))


def brief(ctx: RunContext, kept: dict[str, Any]) -> dict[str, Any]:
    """The policy and the plan alone on worlds of the revision's own (``worlds.revision_worlds``: apart from those
    the trainings are judged on, since the revised policy is chosen there and must not have been told them, and
    from the per-iteration and final ones), as many as the training was judged on; a learner that refuses is
    recorded (``error``) and the chain stays."""
    asked = learner_pb2.EvaluateRequest(job_id=kept["job_id"], episodes=int(kept.get("episodes", 0)) or
                                        ctx.budgets.eval_episodes, seed=worlds.revision_worlds(ctx.seed),
                                        episode_length=ctx.settings.final_episode_frames)
    scores: dict[str, Any] = {"episodes": asked.episodes, "seed": asked.seed}
    try:
        for key, plan_alone in (("success_rate", False), ("plan_alone_success_rate", True)):
            asked.plan_alone = plan_alone
            scores[key] = ctx.stubs.learner.Evaluate(asked, timeout=evaluation_seconds(ctx, asked)).success_rate
    except grpc.RpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise  # the learner or env server is gone: the run pauses, resumable
        scores["error"] = f"{exc.code().name}: {exc.details()}"
        log.warning("kept plan: the revision's briefing was refused (%s); the chain stays", scores["error"])
    return scores


def outcome_text(kept: dict[str, Any]) -> str:
    """How a training around the plan did, in words: the macro actions its test runs refused, its learning curve,
    what the policy chose, and the policy and the plan alone on the briefing's worlds (never those the revision
    will be judged on)."""
    refused = kept.get("refused_macro_actions") or []
    briefing = kept["briefing"]
    chose = choices_text(last_shares(kept.get("curve", [])), kept.get("config_name", ""))
    return ("".join(f"Your macro action {macro_short_name(kept.get('config_name', ''), r['name'])} was refused by "
                    "its test run and left out "
                    f"of that training: {r['error'][:500]}\n" for r in refused)
            + "Learning curve of that training (frames trained: success rate and mean return of the recent "
            f"training episodes):\n{curve_text(kept.get('curve', []))}\n"
            + (f"{chose}\n" if chose else "")
            + "On the worlds it was judged on, the policy did not do better than the plan alone. On "
            f"{briefing['episodes']} other new worlds (whole episodes, the task's success): the policy "
            f"{briefing['success_rate']:.0%}, the plan alone {briefing['plan_alone_success_rate']:.0%}.")


def final_controller(ctx: RunContext) -> str | None:
    """The kept plan's policy (its job id) when it did better than the plan alone on the same worlds; None: the
    chain is the final controller. (A state written before the plan alone was scored compares with the chain's
    iteration score.)"""
    kept = ctx.state.kept_plan or {}
    alone = kept.get("plan_alone_success_rate", kept.get("chain_success_rate", 1.0))
    if kept.get("job_id") and kept.get("success_rate", 0.0) > alone:
        return str(kept["job_id"])
    return None


def evaluate_kept_plan(ctx: RunContext, job_id: str, *, episodes: int, seed: int, animate: int = 0) -> FinalResult:
    """The policy around the kept plan on the whole task (its links: how far episodes got through the plan)."""
    result = FinalResult(episodes=episodes, frames_used=ctx.state.frames_used, seed=seed,
                         controller=f"kept plan: the plan's chain with policy {job_id} stepping in")
    return learner_evaluation(ctx, learner_pb2.EvaluateRequest(
        job_id=job_id, episodes=episodes, seed=seed, episode_length=ctx.settings.final_episode_frames,
        animate=animate), result, "final (kept plan)")
