"""The paper's final controller on a game task (issue 36, item 2), second candidate: RL around the kept plan on
the game's own reward. The plan's sub-tasks that have a controller (a trained policy, or code) are the steps of one
macro action (``RLConfig.plan``, as :mod:`services.planner.kept_plan` builds it) next to every primitive; the policy
is paid the game's reward (the task's reward terms, not the plan's stages: a curriculum has no one goal) over the
game's episodes, and may step in where the plan's controllers leave the player to die. Its config is the
planner's (K, the plan action's prior, every primitive), with one more default: a plan action hands control back
on the frame the player is hurt, so the policy can act against what hurts it. It is scored on the iterations'
worlds like every candidate (:func:`services.planner.game_controller.scored_training`) and recorded in
``state.kept_plan`` (with ``score``, never a success rate)."""

from __future__ import annotations

from rlgpt.v1 import learner_pb2, planner_pb2
from services.planner import game_task
from services.planner.attempts import Attempts, RLAttempt
from services.planner.context import Mode, RunContext
from services.planner.game_controller import scored_training
from services.planner.kept_plan import kept_plan_config, kept_plan_name, trained
from services.planner.state import RunState, SubTaskState


def steps(plan: planner_pb2.Plan | None, state: RunState) -> planner_pb2.Plan:
    """The plan's sub-tasks with a controller (a trained policy, or code), in plan order: the kept plan's steps."""
    kept = planner_pb2.Plan()
    for st in plan.subtasks if plan else []:
        sub = state.subtasks.get(st.name)
        if sub is not None and (trained(sub) or sub.skill_code):
            kept.subtasks.append(st)
    return kept


def possible(ctx: RunContext, plan: planner_pb2.Plan | None) -> bool:
    """A game task of an RL-GPT run with a learner and kept plans on, a step with a controller, none trained yet."""
    if not ctx.game or ctx.mode != Mode.RL_GPT or ctx.stubs.learner is None or not ctx.settings.keep_plan:
        return False
    return ctx.state.kept_plan is None and bool(steps(plan, ctx.state).subtasks)


def config(ctx: RunContext, plan: planner_pb2.Plan, frames: int | None) -> learner_pb2.RLConfig:
    """The kept plan's config (its steps registered) on the game's reward terms and episodes, on ``frames``
    (None: the planner's env_frames_per_training)."""
    task = ctx.run.request.task
    built = kept_plan_config(ctx, steps(plan, ctx.state))
    game_task.on_the_game(built, task, ctx.settings)
    built.env_frames = ctx.budgets.env_frames_per_training if frames is None else frames
    built.plan_interrupt.damage = True
    return built


def train(ctx: RunContext, attempts: Attempts, plan: planner_pb2.Plan, frames: int | None) -> None:
    """Trains the policy around the kept plan on ``frames``, scores it and records it in ``state.kept_plan``."""
    task = ctx.run.request.task
    st = planner_pb2.SubTask(name=kept_plan_name(task.name), decision=planner_pb2.DECISION_RL,
                             description="RL around the kept plan on the game's own reward: the plan is one macro "
                                         "action")

    def build(st: planner_pb2.SubTask, state: SubTaskState) -> RLAttempt:
        built = config(ctx, plan, frames)
        return RLAttempt(st, state, [], config=built, details={
            "kept_plan": True, "config_by": "planner defaults", "steps": [s.name for s in steps(plan, ctx.state)
                                                                            .subtasks],
            "skill_max_steps": built.skill_max_steps})

    record = scored_training(ctx, attempts, st, build)
    record.pop("kept_plan", None)
    ctx.state.kept_plan = record
    ctx.save()
