"""The task-level (long-horizon) controller: the plan run as a chain, evaluated on the whole task.

Each sub-task of the plan is one link with its controller: its coded skill, or its trained policy. In each episode
a link acts until its sub-task's success conditions hold or its frames are spent, then the next link starts; the
episode counts when the whole task's conditions hold. When a plan has a trained policy the learner runs the chain
(``EvaluateRequest.chain``: several checkpoints and skills in one session); an all-code plan runs as the env
server's plan (RunSkill with ``plan``: each skill until its sub-task is done). The same evaluation runs after every
outer iteration (success per iteration) and at the end (:class:`~services.planner.state.FinalResult`), every
controller on the same worlds (rlgpt/worlds.py). A game task's evaluations (:mod:`services.planner.game_task`)
play its own episodes, are measured by the game's score and count toward the run's frames.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc

from rlgpt import deadlines, worlds
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner import game_task
from services.planner.context import RunContext
from services.planner.state import Decision, FinalResult, RunState, SubTaskState

log = logging.getLogger(__name__)
CHAIN_CONTROLLER = "chain of coded skills"
NO_CONTROLLER = "none: no sub-task has a skill or a trained policy yet"
FAILED_TAILS, TAIL_LINES = 3, 12
"""Failed chain episodes whose trajectory's last lines are kept (for the fast agent's RL around the plan)."""


def policy_of(sub: SubTaskState) -> str:
    """The trained policy a sub-task's link runs: the one whose evaluation measured best (every evaluation of a
    sub-task uses the same worlds), the latest among equals; the latest training when none was evaluated. A
    revision that trained worse never replaces a better policy in the chain. A policy pinned by the whole task's
    paired comparison (``policy_job``) comes first."""
    if sub.policy_job:
        return sub.policy_job
    evaluated = [(float(t.get("success_rate", 0.0)), i, t["job_id"]) for i, t in enumerate(sub.tests)
                 if t.get("job_id") and not t.get("error")]
    return max(evaluated)[2] if evaluated else sub.job_id


def rl_jobs(plan: planner_pb2.Plan | None, state: RunState) -> list[tuple[str, str]]:
    """``(sub-task, job id)`` of the plan's trained RL sub-tasks (:func:`policy_of`), in plan order."""
    return [(st.name, policy_of(state.subtasks[st.name])) for st in (plan.subtasks if plan else [])
            if state.subtasks[st.name].decision == Decision.RL and state.subtasks[st.name].job_id]


def coded_skills(plan: planner_pb2.Plan | None, state: RunState) -> list[tuple[str, str]]:
    """``(sub-task, code)`` of the plan's sub-tasks whose controller is their code, in plan order: coded ones
    with code, and ones just moved to RL that have code but no trained policy yet (the chain as it stands)."""
    return [(st.name, sub.skill_code) for st in (plan.subtasks if plan else [])
            if (sub := state.subtasks[st.name]).skill_code
            and (sub.decision == Decision.CODE or not sub.job_id)]


def chain_links(plan: planner_pb2.Plan | None, state: RunState, *, skill_frames: int,
                skill_names: dict[str, str]) -> tuple[list[learner_pb2.ChainLink], list[str]]:
    """The plan's links in order, and the sub-tasks left out because they have no controller yet.

    A coded sub-task runs its latest code (registered under ``skill_names[name]``) for at most ``skill_frames``
    (what its tests gave it); an RL sub-task its best trained policy (:func:`policy_of`) for at most its training
    episode length."""
    links, missing = [], []
    for st in plan.subtasks if plan else []:
        sub = state.subtasks[st.name]
        link = learner_pb2.ChainLink(name=st.name, success=list(st.success))
        if sub.decision == Decision.RL and sub.job_id:
            link.job_id = policy_of(sub)
            link.max_frames = int(sub.rl_config.get("episode_length", 0) or 0)
        elif st.name in skill_names:
            link.skill = skill_names[st.name]
            link.max_frames = skill_frames
        else:
            missing.append(st.name)
            continue
        links.append(link)
    return links, missing


def chain_skill_name(ctx: RunContext, subtask: str) -> str:
    """The name a sub-task's code is registered under as a link of this run's chain (and as a macro action)."""
    return f"{subtask[:40]}__chain{ctx.run.id[-6:]}"


def register_chain_skills(ctx: RunContext, codes: list[tuple[str, str]]) -> dict[str, str]:
    """The ``(sub-task, code)`` skills registered under names of this run's chain: sub-task -> registered name."""
    names = {}
    for name, code in codes:
        names[name] = chain_skill_name(ctx, name)
        ctx.stubs.env.RegisterSkill(env_pb2.RegisterSkillRequest(
            name=names[name], code=code, replace=True, description=f"{name}: its code in the run's chain"))
    return names


def evaluate_chain(ctx: RunContext, *, episodes: int, seed: int, label: str, animate: int = 0) -> FinalResult:
    """Evaluates the plan as it stands as a chain on the whole task (``label`` names the evaluation in logs;
    ``animate``: GIFs of that many successful and failed episodes come back in the episodes)."""
    plan = ctx.state.plan_proto()
    task = ctx.run.request.task
    whole = common_pb2.TaskSpec(name=task.name, description=task.description, success=list(task.success),
                                objective=task.objective)
    result = FinalResult(episodes=episodes, frames_used=ctx.state.frames_used, controller=NO_CONTROLLER, seed=seed)
    jobs, codes = rl_jobs(plan, ctx.state), coded_skills(plan, ctx.state)
    if not jobs:
        if plan is not None and codes and len(codes) == len(plan.subtasks):
            return measured(ctx, _code_chain(ctx, plan, codes, whole, result, seed, animate))
        if not codes:
            return result
    if ctx.stubs.learner is None:
        result.error = "the plan has trained policies and this planner has no learner to run them"
        return result
    try:
        names = register_chain_skills(ctx, codes)
    except grpc.RpcError as exc:
        result.error = f"{exc.code().name}: {exc.details()}"
        return result
    links, missing = chain_links(plan, ctx.state, skill_frames=ctx.settings.test_steps, skill_names=names)
    result.controller = "chain: " + " -> ".join(
        f"{link.name} ({'policy ' + link.job_id if link.job_id else 'code'})" for link in links)
    if missing:
        result.controller += f"; without a controller yet: {', '.join(missing)}"
    return measured(ctx, learner_evaluation(ctx, learner_pb2.EvaluateRequest(
        chain=links, task=whole, episodes=episodes, seed=seed,
        episode_length=ctx.episode_cap(), animate=animate), result, label))


def measured(ctx: RunContext, result: FinalResult) -> FinalResult:
    """A game task's evaluation with its measure (the game's score and each achievement's success rate, from the
    achievements its episodes unlocked) and its frames counted toward the run's; another task's as it is."""
    if ctx.game and result.episode_summaries:
        result.score, result.achievement_rates = game_task.measure(result.episode_summaries, ctx.describe.achievements)
        steps = [e.steps for e in result.episode_summaries]
        result.episode_cap = ctx.episode_cap()  # the cap it played under, before its episodes may raise it
        result.episodes_cut = game_task.cut_episodes(
            steps, result.episode_cap, game_task.episode_frames(ctx.run.request.task, ctx.settings))
        ctx.spend_evaluation(sum(steps))
        ctx.note_episodes(steps)
        result.frames_used = ctx.state.frames_used
    return result


def evaluation_seconds(ctx: RunContext, request: learner_pb2.EvaluateRequest, config_length: int = 0) -> float:
    """Evaluate's deadline: its episodes at their length (the request's, else ``config_length``, the job's config's,
    else the planner's final_episode_frames)."""
    length = request.episode_length or config_length or game_task.episode_frames(ctx.run.request.task, ctx.settings)
    return deadlines.frames_seconds(request.episodes * length)


def learner_evaluation(ctx: RunContext, request: learner_pb2.EvaluateRequest, result: FinalResult,
                       label: str) -> FinalResult:
    """``result`` filled from the learner's Evaluate (success, returns, per link or plan step how far episodes
    got); a refusal is the result's error, a learner that is gone pauses the run (the error propagates)."""
    assert ctx.stubs.learner is not None
    try:
        response = ctx.stubs.learner.Evaluate(request, timeout=evaluation_seconds(ctx, request))
    except grpc.RpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise  # the learner is gone: the run pauses, resumable
        result.error = f"{exc.code().name}: {exc.details()}"
        log.warning("%s evaluation failed: %s", label, result.error)
        return result
    result.success_rate, result.returns = response.success_rate, list(response.returns)
    result.successes = [e.success for e in response.episodes]
    result.failed = failed_episodes(list(response.episodes))
    result.episode_summaries = list(response.episodes)
    result.links = [{"name": s.name, "reached": s.reached, "succeeded": s.succeeded,
                     "mean_frames": round(s.mean_frames, 1)} for s in response.links]
    return result


def _code_chain(ctx: RunContext, plan: planner_pb2.Plan, codes: list[tuple[str, str]], whole: common_pb2.TaskSpec,
                result: FinalResult, seed: int, animate: int = 0) -> FinalResult:
    """An all-code plan: its sub-tasks' skills as the env server's plan (RunSkill with ``plan``, no policy), each
    run until its sub-task's conditions hold, in plan order: the plan action a kept plan's policy steps in
    between, on the worlds every other controller is evaluated on."""
    result.controller = CHAIN_CONTROLLER
    frames = ctx.episode_cap()
    try:
        names = register_chain_skills(ctx, codes)
        response = ctx.stubs.env.RunSkill(env_pb2.RunSkillRequest(
            plan=[names[name] for name, _ in codes],
            stages=[env_pb2.Stage(success=list(st.success)) for st in plan.subtasks],
            episodes=result.episodes, seed=seed, max_steps=frames, task=whole,
            animate=animate), timeout=deadlines.frames_seconds(result.episodes * frames))
    except grpc.RpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise
        result.error = f"{exc.code().name}: {exc.details()}"
        return result
    result.success_rate, result.returns = response.success_rate, [e.episode_return for e in response.episodes]
    result.successes = [e.success for e in response.episodes]
    result.failed = failed_episodes(list(response.episodes))
    result.episode_summaries = list(response.episodes)
    result.links = plan_links(plan, list(response.episodes))
    return result


def plan_links(plan: planner_pb2.Plan, episodes: list[common_pb2.EpisodeSummary]) -> list[dict[str, Any]]:
    """Per link of an all-code chain, how far its episodes got (EpisodeSummary.stages_done): a link is reached
    when every earlier one was done, and succeeded when its own stage was; empty where the env server did not
    say (an older server). Its mean frames (:func:`link_frames`) are None where the server did not say when each
    stage was done (an older server's EpisodeSummary has no stage_frames)."""
    if not episodes or any(len(e.stages_done) != len(plan.subtasks) for e in episodes):
        return []
    timed = all(len(e.stage_frames) == len(plan.subtasks) for e in episodes)
    links = []
    for i, st in enumerate(plan.subtasks):
        reached = [e for e in episodes if all(e.stages_done[:i])]
        frames = [link_frames(e, i) for e in reached] if timed else []
        mean = (round(sum(frames) / len(frames), 1) if frames else 0.0) if timed else None
        links.append({"name": st.name, "reached": len(reached),
                      "succeeded": sum(1 for e in reached if e.stages_done[i]), "mean_frames": mean})
    return links


def link_frames(episode: common_pb2.EpisodeSummary, i: int) -> int:
    """Env frames episode ``episode`` spent in link ``i`` (it reached it): from the step its last earlier stage was
    done (0 for the first link) to the step its own was, or to the episode's end when it never was. A stage whose
    conditions already held when its link started took none (the plan moves on at once)."""
    start = max(episode.stage_frames[:i], default=0)
    end = episode.stage_frames[i] if episode.stages_done[i] else episode.steps
    return max(0, end - start)


def failed_episodes(episodes: list[common_pb2.EpisodeSummary], tails: int = FAILED_TAILS,
                    tail_lines: int = TAIL_LINES) -> list[dict[str, Any]]:
    """How each failed episode ended, what it had done by then, and for the first ``tails`` of them the last
    ``tail_lines`` lines of its trajectory."""
    failed = []
    for e in episodes:
        if e.success:
            continue
        record: dict[str, Any] = {"end_reason": e.end_reason, "death_cause": e.death_cause, "steps": e.steps,
                                  "achievements": list(e.achievements),
                                  "inventory": {i.item: i.count for i in e.final_inventory}}
        if len(failed) < tails and e.text:
            record["tail"] = e.text.splitlines()[-tail_lines:]
        failed.append(record)
    return failed


def final_evaluation(ctx: RunContext, animate: int = 0) -> FinalResult:
    """The whole task's final evaluation: the finished plan's chain on the run's final worlds (apart from every
    test; a policy around the kept plan is evaluated on them too); ``animate``: GIFs of that many successful and
    failed episodes."""
    return evaluate_chain(ctx, episodes=ctx.budgets.eval_episodes, seed=worlds.final_worlds(ctx.seed), label="final",
                          animate=animate)


def iteration_evaluation(ctx: RunContext) -> FinalResult:
    """The chain after an outer iteration (the paper's success per iteration)."""
    return evaluate_chain(ctx, episodes=ctx.budgets.eval_episodes, seed=worlds.iteration_worlds(ctx.seed),
                          label=f"iteration {ctx.state.outer_iteration}")
