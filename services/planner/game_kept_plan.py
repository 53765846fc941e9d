"""The paper's final controller on a game task (issue 36, item 2), second candidate: RL around the kept plan on
the game's own reward. The plan's sub-tasks that have a controller (a trained policy, or code) are the steps of one
macro action (``RLConfig.plan``, as :mod:`services.planner.kept_plan` builds it) next to every primitive; the policy
is paid the game's reward (the task's reward terms, not the plan's stages: a curriculum has no one goal) over the
game's episodes, and may step in where the plan's controllers leave the player to die. The fast agent configures it
as it configures RL around any kept plan (:func:`services.planner.kept_plan.configured`: primitives, macro actions it
codes, K, reward terms added to the game's, when the plan hands back), told in the game's terms
(:mod:`services.planner.agents.game_kept_plan`): the game's score, the plan's steps, how the plan's chain died in
its evaluation (:mod:`services.planner.survival`'s text) and its achievements' rates. Without a fast agent (the
one-agent setup) or with an unusable answer, the planner's defaults train (K, the plan action's prior, every
primitive), with one more default: a plan action hands control back on the frame the player is hurt, so the policy
can act against what hurts it. It is scored on the iterations' worlds like every candidate
(:func:`services.planner.game_controller.scored_training`) and recorded in ``state.kept_plan`` (with ``score``,
never a success rate). The fast agent's answer is kept in the run's state as it arrives: a run stopped after it
and resumed trains with it and asks nothing (:mod:`services.planner.game_resume`)."""

from __future__ import annotations

import functools
from typing import Any

from rlgpt.v1 import common_pb2, learner_pb2, planner_pb2
from services.planner import game_resume, game_task, survival
from services.planner.agents.game_kept_plan import HAND_BACK_WHEN_HURT, GameBriefing, write_game_kept_plan
from services.planner.agents.kept_plan import stages_done
from services.planner.attempts import Attempts, RLAttempt
from services.planner.context import Mode, RunContext
from services.planner.game_controller import scored_training
from services.planner.kept_plan import configured, kept_plan_config, kept_plan_name, told_plan, trained
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
    built.plan_interrupt.damage = HAND_BACK_WHEN_HURT
    return built


def evaluated(state: RunState) -> dict[str, Any]:
    """The iteration record of the chain the kept plan runs: the best chain's (the plan is restored to it after
    every iteration), else the last evaluated one's; {} when none was evaluated."""
    best = (state.best or {}).get("iteration")
    records = [it for it in state.iterations if it.get("episodes")]
    return next((it for it in records if it.get("iteration") == best), records[-1] if records else {})


def episodes_of(record: dict[str, Any], plan: planner_pb2.Plan) -> list[common_pb2.EpisodeSummary]:
    """An evaluation's episodes as its iteration record keeps them (``failed``: a game's episodes never succeed,
    so all of them), with the plan's steps each had done by its end; those with a trajectory end first."""
    out = [common_pb2.EpisodeSummary(
        end_reason=e.get("end_reason", ""), death_cause=e.get("death_cause", ""), steps=int(e.get("steps", 0)),
        achievements=list(e.get("achievements", [])), text="\n".join(e.get("tail", [])),
        stages_done=stages_done(plan, e)) for e in record.get("failed", [])]
    return sorted(out, key=lambda e: not e.text)


def deaths_text(ctx: RunContext, record: dict[str, Any], plan: planner_pb2.Plan) -> str:
    """How the chain's evaluation episodes died (survival's text, without its last line: its advice to the slow
    agent, which may change the plan; this agent may not), or that none did or none was evaluated."""
    if not record:
        return "The chain was not evaluated on the whole game."
    text = survival.deaths_text(ctx, episodes_of(record, plan), plan)
    if not text:
        return f"None of its {record['episodes']} evaluation episodes ended with the player's death."
    return "\n".join(text.splitlines()[:-1])


def chain_text(record: dict[str, Any]) -> str:
    """The chain's score and each achievement's success rate in its evaluation ("" when not scored)."""
    rates: dict[str, float] = record.get("achievement_rates") or {}
    if record.get("score") is None or not rates:
        return ""
    unlocked = sorted((r, name) for name, r in rates.items() if r > 0)[::-1]
    never = [name for name, r in rates.items() if not r > 0]
    return (f"Its score: {record['score']:.1f} (iteration {record.get('iteration')}). Achievements unlocked, with the "
            f"percentage of episodes that unlocked each: {', '.join(f'{n} {r:.0f}%' for r, n in unlocked) or 'none'}"
            f". Never unlocked: {', '.join(never) or 'none'}.")


def train(ctx: RunContext, attempts: Attempts, plan: planner_pb2.Plan, frames: int | None) -> None:
    """Trains the policy around the kept plan on ``frames``, configured by the fast agent (one LLM call) where
    there is one, scores it and records it in ``state.kept_plan``."""
    task = ctx.run.request.task
    st = planner_pb2.SubTask(name=kept_plan_name(task.name), decision=planner_pb2.DECISION_RL,
                             description="RL around the kept plan on the game's own reward: the plan is one macro "
                                         "action")
    kept = steps(plan, ctx.state)

    def build(st: planner_pb2.SubTask, state: SubTaskState) -> RLAttempt:
        built = config(ctx, plan, frames)
        told, record = told_plan(ctx, kept), evaluated(ctx.state)
        briefing = GameBriefing(
            deaths=deaths_text(ctx, record, told), chain=chain_text(record), env_frames=built.env_frames,
            episode_frames=built.episode_length, eval_episodes=ctx.budgets.eval_episodes)
        ask = functools.partial(write_game_kept_plan, task=task, plan=told, briefing=briefing,
                                iteration=ctx.state.outer_iteration)
        attempt = configured(ctx, attempts, st, state, built, {"kept_plan": True},
                             game_resume.recorded(ctx, st.name, ask),  # asked once, across a stop too
                             own_kinds={t.kind for t in task.reward_terms})  # the game's reward: always paid
        attempt.details.update(steps=[s.name for s in kept.subtasks], skill_max_steps=built.skill_max_steps)
        return attempt

    record = scored_training(ctx, st, build)
    record.pop("kept_plan", None)
    ctx.state.kept_plan = record
    ctx.save()
