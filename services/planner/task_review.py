"""The whole task decides: after each outer iteration, how the whole task's evaluation goes on to the agents, and
which controller the run keeps.

The critic judges the evaluation (``JudgeTask``: where episodes end, per link; why, death causes aggregated; the
trajectories around each kind of failure) and sends the work to the fast agent (one link's sub-task is reopened:
its skill revised, or its training continued from its checkpoint) or to the slow agent (a re-plan, e.g. a
survival sub-task; the link it names is reopened too). Without a critic in the setup the measured fallback reopens
the link that loses the most episodes, as :func:`~services.planner.judging.measured_verdict` does for a sub-task.

Every evaluation of a run plays the same worlds (rlgpt/worlds.py), so the controller after an iteration is
compared with the best one so far world by world (:func:`rlgpt.stats.paired`, the exact McNemar test): it
replaces the best only when it solved more worlds that the best did not than the reverse; otherwise the run goes
back to the best plan and controllers (a skill's code, a pinned policy) and the next revision starts from there:
the next iteration's work is decided on that plan, and the slow agent reads that its revision was rolled back, with
both measures (:func:`rolled_back`).
A game task's episodes never succeed: its controller replaces the best when it scores higher on the same worlds
(:mod:`services.planner.game_task`).
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

import grpc
from google.protobuf import json_format

from rlgpt import stats
from rlgpt.llm.client import record_from_json
from rlgpt.v1 import common_pb2, critic_pb2, planner_pb2
from services.planner import game_task
from services.planner.context import RunContext
from services.planner.controller import policy_of
from services.planner.judging import JUDGE_ROLLOUTS, critic_judges, critic_terms
from services.planner.state import Decision, IterationRecord, Status, SubTaskState

log = logging.getLogger(__name__)
TAIL_CHARS = 1500
"""Most characters of one episode's text trajectory sent to the critic (its end: where the episode failed)."""


def task_links(plan: planner_pb2.Plan, ctx: RunContext, links: list[dict[str, Any]]) -> list[critic_pb2.TaskLink]:
    """The evaluated chain's links with their sub-task's decision, conditions and own measured success; a link's
    mean frames -1 where they are not known."""
    by_name = {st.name: st for st in plan.subtasks}
    out = []
    for link in links:
        st, sub = by_name.get(link["name"]), ctx.state.subtasks.get(link["name"])
        if st is None or sub is None:
            continue
        frames = link.get("mean_frames")  # None: the env server did not say when each link was done
        out.append(critic_pb2.TaskLink(
            subtask=st.name, decision=str(sub.decision), success=list(st.success), reached=int(link["reached"]),
            succeeded=int(link["succeeded"]), mean_frames=-1.0 if frames is None else float(frames),
            own_success_rate=sub.success_rate if sub.tests else -1.0))
    return out


def weakest_link(links: list[dict[str, Any]]) -> str:
    """The link that loses the most episodes (reached and not succeeded; the earlier among equals); "" if none
    loses any."""
    lost = [(int(link["reached"]) - int(link["succeeded"]), -i, link["name"]) for i, link in enumerate(links)]
    best = max(lost, default=(0, 0, ""))
    return best[2] if best[0] > 0 else ""


def measured_task_verdict(record: IterationRecord, target: float) -> critic_pb2.Verdict:
    """Without a critic: the link that loses the most episodes goes back to the fast agent; no link: the slow
    agent re-plans. The whole game: when most of its episodes died, the slow agent re-plans too (as the critic's
    rule does: a survival sub-task), the weakest link still reopened."""
    rate = record.success_rate or 0.0
    link = weakest_link(record.links)
    where = "; ".join(f"{x['name']}: {x['succeeded']}/{x['reached']} episodes met its conditions" for x in record.links)
    measured = (f"The whole game scored {record.score:.1f} in its evaluation (target {100.0 * target:.1f})."
                if record.score is not None else  # only a game task's record has a score
                f"The whole task succeeded in {rate:.0%} of its evaluation (target {target:.0%}).")
    died = sum(1 for e in record.failed if e.get("death_cause") or e.get("end_reason") == "death")
    survive = record.score is not None and died * 2 > len(record.failed)
    suggestion = f"Make {link} succeed where the chain hands it over." if link else "Revise the plan."
    if survive:
        suggestion = (f"{died} of {len(record.failed)} episodes ended in the player's death: revise the plan with "
                      f"sub-tasks that keep the player alive. {suggestion if link else ''}").strip()
    return critic_pb2.Verdict(
        success=record.score / 100.0 >= target if record.score is not None else rate >= target, success_rate=rate,
        subtask=link, target=critic_pb2.TARGET_FAST if link and not survive else critic_pb2.TARGET_SLOW,
        diagnosis=measured + (f" Per link: {where}." if where else ""), suggestion=suggestion)


def review(ctx: RunContext, plan: planner_pb2.Plan, record: IterationRecord,
           episodes: list[common_pb2.EpisodeSummary], target: float) -> critic_pb2.Verdict:
    """The whole task's verdict on the iteration's evaluation: the critic's JudgeTask where the setup has a critic,
    the measured one otherwise."""
    terms = critic_terms(ctx) if critic_judges(ctx) else None
    if terms is None:
        return measured_task_verdict(record, target)
    limit = min(JUDGE_ROLLOUTS, terms.max_rollouts)
    shown = []
    for episode in episodes[:limit]:
        copy = common_pb2.EpisodeSummary()
        copy.CopyFrom(episode)
        copy.animation, copy.text = b"", copy.text[-TAIL_CHARS:]  # the critic reads the end: where it failed
        shown.append(copy)
    task = ctx.run.request.task
    response = ctx.stubs.critic.JudgeTask(critic_pb2.JudgeTaskRequest(
        task=task.name, description=task.description, success=list(task.success),
        links=task_links(plan, ctx, record.links), episodes=shown, target_success=target,
        rules=ctx.describe.rules, game=ctx.describe.display_name, iteration=record.iteration,
        **game_measure(record)), timeout=ctx.stubs.judge_seconds)
    if response.llm_record:
        try:
            ctx.run.llm_call(record_from_json(response.llm_record), "whole task")
        except ValueError as exc:  # a critic of another version: the verdict still counts
            log.warning("critic's LLM record of the whole task is unreadable: %s", exc)
    return response.verdict


def game_measure(record: IterationRecord) -> dict[str, Any]:
    """A game task's score and rates for the critic (it judges them instead of a success rate); {} otherwise."""
    if record.score is None or math.isnan(record.score):
        return {}
    return {"score": record.score, "achievement_rates": dict(record.achievement_rates or {})}


def verdict_json(verdict: critic_pb2.Verdict) -> dict[str, Any]:
    return json_format.MessageToDict(verdict, preserving_proto_field_name=True)


def apply(ctx: RunContext, plan: planner_pb2.Plan, verdict: critic_pb2.Verdict) -> str:
    """The verdict's work handed out: the named link's sub-task reopened (the fast agent revises it with the
    verdict as feedback; an RL one continues from its checkpoint), whatever the target (a slow agent that keeps the
    plan would otherwise change nothing), and on target slow the slow agent's feedback too.
    Returns the reopened sub-task ("" if none)."""
    names = [st.name for st in plan.subtasks]
    text = f"{verdict.diagnosis} {verdict.suggestion}".strip()
    reopened = verdict.subtask if verdict.subtask in names else ""
    if reopened:
        sub = ctx.state.subtasks[reopened]
        sub.status, sub.inner_iterations, sub.reopened = Status.PENDING, 0, True
        sub.feedback = f"In the whole task's chain: {text}"
    if verdict.target == critic_pb2.TARGET_SLOW:
        ctx.state.slow_feedback = f"The whole task after iteration {ctx.state.outer_iteration}: {text}"
    ctx.save()
    return reopened


def snapshot(ctx: RunContext, record: IterationRecord) -> dict[str, Any]:
    """The controller just evaluated, its score and per-world successes (what keep_best compares)."""
    score = {"score": record.score} if record.score is not None else {}  # a game task's measure
    return {"iteration": record.iteration, "success_rate": record.success_rate, "successes": list(record.successes),
            **score, **(record.chain or chain_of(ctx))}  # the record's chain: taken once, before keep_best


def chain_of(ctx: RunContext) -> dict[str, Any]:
    """The controller in the state: its plan and each sub-task's controller (code, the policy the chain ran)."""
    plan = ctx.state.plan_proto()
    subs = {st.name: ctx.state.subtasks[st.name] for st in (plan.subtasks if plan else [])}
    return {"plan": ctx.state.plan, "controllers": {name: controller_of(sub) for name, sub in subs.items()}}


def controller_of(sub: SubTaskState) -> dict[str, Any]:
    """A sub-task's controller as the best snapshot keeps it: its code or policy, and where the sub-task stood with
    it (status, success rate, feedback); an RL one's training too (its job, config and macro actions: what the
    chain runs it with, kept when a re-plan gives the name other conditions and the sub-task starts fresh)."""
    rl = sub.decision == Decision.RL
    return {"decision": str(sub.decision), "skill_code": sub.skill_code, "policy": policy_of(sub) if rl else "",
            "status": str(sub.status), "success_rate": sub.success_rate, "feedback": sub.feedback,
            **({"job_id": sub.job_id, "rl_config": copy.deepcopy(sub.rl_config),
                "macro_actions": copy.deepcopy(sub.macro_actions)} if rl else {})}


def keep_best(ctx: RunContext, record: IterationRecord) -> str:
    """The iteration's controller kept when it is better than the best so far on the same worlds, paired; the best
    restored otherwise. Returns what was decided, in words (with the test)."""
    best = ctx.state.best
    if best is None or not best.get("successes"):
        ctx.state.best = snapshot(ctx, record)
        return "the first evaluated controller: kept"
    if ctx.game:
        return _keep_higher_score(ctx, record, best)
    comparison = stats.paired(record.successes, best["successes"])
    if comparison.new_is_better:
        ctx.state.best = snapshot(ctx, record)
        return f"kept: better than iteration {best['iteration']}'s, {comparison.text()}"
    restore(ctx, best)
    return f"not better than iteration {best['iteration']}'s ({comparison.text()}): that controller is restored"


def _keep_higher_score(ctx: RunContext, record: IterationRecord, best: dict[str, Any]) -> str:
    """A game task's comparison: the higher score on the same worlds is kept (the earlier among equals)."""
    ours, theirs = record.score, best.get("score")
    compared = f"{game_task.score_text(ours)} against iteration {best['iteration']}'s {game_task.score_text(theirs)}"
    if ours is not None and (theirs is None or ours > theirs):
        ctx.state.best = snapshot(ctx, record)
        return f"kept: {compared}"
    restore(ctx, best)
    return f"not better ({compared}): that controller is restored"


def in_force(iterations: list[dict[str, Any]], best: dict[str, Any] | None) -> dict[str, Any]:
    """The record of the iteration whose controller is in force: the best one keep_best kept (restored after a
    worse revision), else the last; {} before any iteration. What is said about the plan in force (its chain's
    rate, its failed episodes) comes from here, not from a rolled-back revision's record."""
    kept = (best or {}).get("iteration")
    return next((r for r in reversed(iterations) if kept is not None and r.get("iteration") == kept),
                iterations[-1] if iterations else {})


def rolled_back(ctx: RunContext, record: IterationRecord) -> str:
    """What the slow agent reads after :func:`keep_best` restored the best controller instead of the iteration's:
    the revision's measure against the best's on the same worlds (a game task's score, another's success rate) and
    that the run went back to the best plan, on which the next iteration's work is decided; "" when the iteration's
    controller was kept, or not evaluated."""
    best = ctx.state.best
    if not record.kept or best is None or best.get("iteration") == record.iteration:
        return ""
    if ctx.game:
        ours, theirs = game_task.score_text(record.score), game_task.score_text(best.get("score"))
    else:
        ours, theirs = (stats.rate_text(sum(s), len(s)) for s in (record.successes, best["successes"]))
    return (f"Iteration {record.iteration}'s revision did not beat the best controller on the same worlds: {ours} "
            f"against iteration {best['iteration']}'s {theirs}. It was rolled back: the plan, skills and policies "
            f"in force are iteration {best['iteration']}'s again.")


def restore(ctx: RunContext, best: dict[str, Any]) -> None:
    """The best controller back: its plan, each sub-task's decision, code and policy (pinned), and where each
    sub-task stood with it (:func:`recorded_status`, its success rate and feedback), so a link that had failed is
    attempted again and the slow agent reads that it failed; a fresh inner budget for the next iteration."""
    if best.get("plan"):
        ctx.state.plan = best["plan"]
        ctx.run.plan = json_format.ParseDict(best["plan"], planner_pb2.Plan())
    for name, controller in best.get("controllers", {}).items():
        sub = ctx.state.subtasks.get(name)
        if sub is None:
            continue
        sub.status, sub.inner_iterations = recorded_status(sub, controller), 0
        sub.decision, sub.skill_code = Decision(controller["decision"]), controller["skill_code"]
        sub.policy_job = controller.get("policy", "")
        sub.success_rate = float(controller.get("success_rate", sub.success_rate))
        sub.feedback = controller.get("feedback", sub.feedback)
        for key in ("job_id", "rl_config", "macro_actions"):  # an RL controller's training
            if key in controller:
                setattr(sub, key, copy.deepcopy(controller[key]))  # the snapshot stays as it was
    ctx.save()


def recorded_status(sub: SubTaskState, controller: dict[str, Any]) -> Status:
    """The status ``sub`` had when ``controller`` was recorded. A record written before statuses were recorded:
    done only where the sub-task still runs that controller and is done (its last verdict passed it), failed
    otherwise: nothing recorded says the controller passed, and a failed link is attempted again where a done one
    would be skipped for good (and the slow agent told it was done)."""
    if "status" in controller:
        return Status(controller["status"])
    same = (str(sub.decision) == controller["decision"] and sub.skill_code == controller["skill_code"]
            and (policy_of(sub) if sub.decision == Decision.RL else "") == controller.get("policy", ""))
    return Status.DONE if same and sub.status == Status.DONE else Status.FAILED


def judged(ctx: RunContext, plan: planner_pb2.Plan, record: IterationRecord,
           episodes: list[common_pb2.EpisodeSummary], target: float) -> critic_pb2.Verdict:
    """:func:`review`, with a critic that refuses recorded (and the measured verdict used): never the end of the
    run. A critic that is gone pauses the run (the error propagates)."""
    try:
        return review(ctx, plan, record, episodes, target)
    except grpc.RpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise
        log.warning("the critic refused the whole task's review (%s: %s); the measured verdict is used",
                    exc.code().name, exc.details())
        return measured_task_verdict(record, target)
