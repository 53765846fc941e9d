"""The paper's final controller on a game task (issue 36, item 2): APPO on the game's own reward and episodes with
the primitives and the plan's coded skills as macro actions (``RLConfig.skills``), trained after the iterations on
the frames left, and kept as the run's final controller only when it scores higher than the best chain on the
same worlds (the iterations' worlds, never the final ones: the choice is made before the final evaluation).

Frames: the training gets what is left once the final evaluation and this policy's own evaluation are kept back
(each at most ``eval_episodes`` x the game's episode length); fewer than :data:`MIN_FRAMES`: no training.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc

from rlgpt import worlds
from rlgpt.v1 import common_pb2, learner_pb2, planner_pb2
from services.planner import game_task
from services.planner.attempts import Attempts, RLAttempt
from services.planner.context import Mode, RunContext
from services.planner.controller import coded_skills, learner_evaluation, measured, register_chain_skills
from services.planner.state import Decision, FinalResult, Status, SubTaskState

log = logging.getLogger(__name__)
MIN_FRAMES = 5_000
"""Fewer frames left than this for the training: none (it would not learn anything)."""


def controller_name(task: str) -> str:
    return f"{task[:60]}__macro_actions"


def training_frames(ctx: RunContext) -> int | None:
    """The frames the training may spend: what is left minus its own evaluation (the final one is kept back by
    ``frames_left``); None: unbounded (the planner's env_frames_per_training)."""
    left = ctx.frames_left()
    if left is None:
        return None
    return max(0, left - game_task.evaluation_frames(ctx.run.request.task, ctx.budgets, ctx.settings))


def wanted(ctx: RunContext, plan: planner_pb2.Plan | None) -> bool:
    """A game task of an RL-GPT run with a learner, coded skills in its plan, none trained yet, frames to train."""
    if not ctx.game or ctx.mode != Mode.RL_GPT or ctx.stubs.learner is None or plan is None:
        return False
    if ctx.state.game_controller is not None or not coded_skills(plan, ctx.state):
        return False
    frames = training_frames(ctx)
    return frames is None or frames >= MIN_FRAMES


def config(ctx: RunContext, skills: list[str]) -> learner_pb2.RLConfig:
    """Every primitive and ``skills`` (registered names) as macro actions of at most the skill test's frames, the
    task's own reward terms and episodes (the game's, as Describe's ResolveTask gave them)."""
    task = ctx.run.request.task
    frames = training_frames(ctx)
    return learner_pb2.RLConfig(
        name=controller_name(task.name), skills=skills, skill_max_steps=ctx.settings.test_steps, seed=ctx.seed,
        task=common_pb2.TaskSpec(name=task.name, objective=task.objective),
        reward_terms=list(task.reward_terms), episode_length=game_task.episode_frames(task, ctx.settings),
        env_frames=ctx.budgets.env_frames_per_training if frames is None else frames)


def train(ctx: RunContext, attempts: Attempts, plan: planner_pb2.Plan) -> None:
    """Trains the policy with the plan's coded skills as macro actions, scores it on the iterations' worlds and
    records it in ``state.game_controller`` with the best chain's score there; a refusal is recorded, the chain
    stays the controller."""
    task = ctx.run.request.task
    name = controller_name(task.name)
    st = planner_pb2.SubTask(name=name, decision=planner_pb2.DECISION_RL,
                             description="the game's own reward: the primitives and the plan's coded skills as "
                                         "macro actions")
    state = ctx.state.subtasks.setdefault(name, SubTaskState(name=name, decision=Decision.RL))
    best = ctx.state.best or {}
    record: dict[str, Any] = {"chain_score": best.get("score"), "chain_iteration": best.get("iteration")}
    try:
        skills = register_chain_skills(ctx, coded_skills(plan, ctx.state))
        attempt = RLAttempt(st, state, [], config=config(ctx, sorted(skills.values())),
                            details={"game_controller": True, "macro_actions": sorted(skills)})
        assert attempt.config is not None
        record.update(macro_actions=sorted(skills), env_frames=attempt.config.env_frames)
        attempts.train_and_evaluate(attempt, eval_seed=worlds.iteration_worlds(ctx.seed))
        if attempt.trained is None:
            record["error"] = "the learner refused the training: " + (state.last_error or state.feedback)
        else:
            score, rates = game_task.measure(list(attempt.trained.evaluation.episodes), ctx.describe.achievements)
            record.update(job_id=attempt.trained.job_id, score=score, achievement_rates=rates,
                          episodes=attempt.trained.asked.episodes)
            state.status = Status.DONE
    except grpc.RpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise  # the learner or env server is gone: the run pauses, resumable
        record["error"] = f"{exc.code().name}: {exc.details()}"
    ctx.state.game_controller = record
    log.info("game controller: %s", {k: v for k, v in record.items() if k != "achievement_rates"})
    ctx.save()


def final_job(ctx: RunContext) -> str | None:
    """The macro-action policy when it scored higher than the best chain on the same worlds; None: the chain."""
    record = ctx.state.game_controller or {}
    ours, chain = record.get("score"), record.get("chain_score")
    if record.get("job_id") and ours is not None and (chain is None or ours > chain):
        return str(record["job_id"])
    return None


def evaluate(ctx: RunContext, job_id: str, *, episodes: int, seed: int, animate: int = 0) -> FinalResult:
    """The macro-action policy on the game's episodes (measured by its score, its frames counted)."""
    task = ctx.run.request.task
    result = FinalResult(episodes=episodes, frames_used=ctx.state.frames_used, seed=seed,
                         controller=f"policy {job_id}: the game's reward, the plan's coded skills as macro actions")
    return measured(ctx, learner_evaluation(ctx, learner_pb2.EvaluateRequest(
        job_id=job_id, episodes=episodes, seed=seed, episode_length=game_task.episode_frames(task, ctx.settings),
        animate=animate), result, "final (macro actions)"))
