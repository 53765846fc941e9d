"""The paper's final controller on a game task (issue 36, item 2), first candidate: APPO on the game's own reward
and episodes with the primitives and the plan's coded skills as macro actions (``RLConfig.skills``), trained after
the iterations (:mod:`services.planner.game_final` says on which frames and chooses among the candidates).

Every candidate is trained and scored the same way (:func:`scored_training`): its policy is evaluated on the
iterations' worlds, where the best chain was scored (never the final ones: the choice is made before the final
evaluation), and its record keeps the chain's score there, the policy's score and rates, and the frames it spent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc

from rlgpt import worlds
from rlgpt.v1 import learner_pb2, planner_pb2
from services.planner import game_resume, game_task
from services.planner.attempts import Attempts, RLAttempt
from services.planner.context import Mode, RunContext
from services.planner.controller import coded_skills, register_chain_skills
from services.planner.judging import frames_per_episode
from services.planner.state import Decision, Status, SubTaskState
from services.planner.trainings import Training

log = logging.getLogger(__name__)


def controller_name(task: str) -> str:
    return f"{task[:60]}__macro_actions"


def training_frames(ctx: RunContext) -> int | None:
    """The frames one training may spend when it is the only one: what is left minus its own evaluation (the final
    one is kept back by ``frames_left``); None: unbounded (the planner's env_frames_per_training)."""
    left = ctx.frames_left()
    if left is None:
        return None
    return max(0, left - ctx.evaluation_hold())


def possible(ctx: RunContext, plan: planner_pb2.Plan | None) -> bool:
    """A game task of an RL-GPT run with a learner, coded skills in its plan, none trained yet."""
    if not ctx.game or ctx.mode != Mode.RL_GPT or ctx.stubs.learner is None or plan is None:
        return False
    return ctx.state.game_controller is None and bool(coded_skills(plan, ctx.state))


def config(ctx: RunContext, skills: list[str], frames: int | None = None) -> learner_pb2.RLConfig:
    """Every primitive and ``skills`` (registered names) as macro actions of at most the skill test's frames, the
    task's own reward terms and episodes (the game's, as Describe's ResolveTask gave them); ``frames``: the
    training's (None: :func:`training_frames`)."""
    task = ctx.run.request.task
    frames = training_frames(ctx) if frames is None else frames
    built = learner_pb2.RLConfig(
        name=controller_name(task.name), skills=skills, skill_max_steps=ctx.settings.test_steps, seed=ctx.seed,
        env_frames=ctx.budgets.env_frames_per_training if frames is None else frames)
    game_task.on_the_game(built, task, ctx.settings)
    return built


Build = Callable[[planner_pb2.SubTask, SubTaskState], RLAttempt]
"""Configures a candidate's training (its sub-task and state given); may register skills (an RpcError)."""


def scored_training(ctx: RunContext, st: planner_pb2.SubTask, build: Build) -> dict[str, Any]:
    """Trains what ``build`` configures, scores its policy on the iterations' worlds (where the best chain was
    scored) and returns the candidate's record: the best chain's score and iteration, the attempt's details, its
    training frames, then its job, score, rates and episodes, or the error (a refusal: the chain stays); ``frames``
    is every frame it spent (training and evaluation), before a stop too, and ``resumed`` what a resumed run took
    over from before the stop (:mod:`services.planner.game_resume`: its job under way, its config)."""
    state = ctx.state.subtasks.setdefault(st.name, SubTaskState(name=st.name, decision=Decision.RL))
    best = ctx.state.best or {}
    record: dict[str, Any] = {"chain_score": best.get("score"), "chain_iteration": best.get("iteration")}
    going = game_resume.kept(ctx, st.name)
    before, reused = int(going.setdefault("before", state.frames)), "answer" in going
    try:
        attempt = build(st, state)
        assert attempt.config is not None
        going["env_frames"] = attempt.config.env_frames
        resume = game_resume.resume_of(ctx, st.name, state, reused)
        record.update(attempt.details, env_frames=attempt.config.env_frames)
        attempt.trained = Training(ctx, st, state, attempt.config, attempt.details, eval_seed=worlds.iteration_worlds(
            ctx.seed), resume=resume).run(frames_per_episode(ctx))
        if resumed := game_resume.resumed_text(resume, reused):
            record["resumed"] = resumed
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
    record["frames"] = state.frames - before
    game_resume.done(ctx, st.name)
    log.info("%s: %s", st.name, {k: v for k, v in record.items() if k != "achievement_rates"})
    return record


def train(ctx: RunContext, attempts: Attempts, plan: planner_pb2.Plan, frames: int | None = None) -> None:
    """Trains the policy with the plan's coded skills as macro actions on ``frames`` (None: all that is left but
    its evaluation), scores it and records it in ``state.game_controller``."""
    st = planner_pb2.SubTask(name=controller_name(ctx.run.request.task.name), decision=planner_pb2.DECISION_RL,
                             description="the game's own reward: the primitives and the plan's coded skills as "
                                         "macro actions")

    def build(st: planner_pb2.SubTask, state: SubTaskState) -> RLAttempt:
        skills = register_chain_skills(ctx, coded_skills(plan, ctx.state))
        return RLAttempt(st, state, [], config=config(ctx, sorted(skills.values()), frames),
                         details={"game_controller": True, "macro_actions": sorted(skills)})

    record = scored_training(ctx, st, build)
    record.pop("game_controller", None)
    ctx.state.game_controller = record
    ctx.save()

