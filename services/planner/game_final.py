"""A game task's final controller (issue 36, item 2): after the iterations, the paper's two controllers on the
game's own reward are trained beside the best chain, and the one that scores higher on the same worlds becomes the
run's final controller.

Candidates, each scored on the iterations' worlds (rlgpt/worlds.py ``iteration_worlds``, where the best chain was
scored; the choice is made before the final evaluation, on worlds apart from the final ones):

- ``chain``: the iterations' best chain (``state.best``; the frames the iterations spent);
- ``macro actions`` (A, :mod:`services.planner.game_controller`): APPO with the primitives and the plan's coded
  skills as macro actions;
- ``kept plan`` (B, :mod:`services.planner.game_kept_plan`): RL around the kept plan.

Frames: the final evaluation's are kept back (``RunContext.frames_left``), and each training keeps back its own
evaluation's (``RunContext.evaluation_hold``: ``eval_episodes`` x the run's episode cap, which follows the longest
episode the run's evaluations played, game_task.episode_cap) while it trains. When both trainings are possible, A
gets half of what is left once one evaluation is kept back, and B then gets all that is left once its own
evaluation is kept back: the other half less what A's evaluation spent, so about half each, and what the
evaluations kept back but did not spend is what the final evaluation leaves. When that half is below
:data:`~services.planner.trainings.MIN_FRAMES`, or B is not possible (no step has a controller, kept plans
off), A gets all but its evaluation; B alone (no coded skill in the plan) gets the same. A training with fewer than
MIN_FRAMES is not made.

Choice: the highest score; among equals the earlier candidate (the chain, then A, then B). The choice is an event
(``FinalControllers``: each candidate's score and frames) and the report's table.
"""

from __future__ import annotations

import logging
from typing import Any

from rlgpt.v1 import learner_pb2, planner_pb2
from services.planner import game_controller, game_kept_plan, game_resume, trainings
from services.planner.attempts import Attempts
from services.planner.context import RunContext
from services.planner.controller import final_evaluation, learner_evaluation, measured
from services.planner.kept_plan import kept_plan_name
from services.planner.state import FinalResult, RunState

log = logging.getLogger(__name__)
CHAIN, MACRO, KEPT = "chain", "macro actions", "kept plan"
"""The candidates' names (``ControllerScore.name``)."""
CONTROLLERS = {MACRO: "policy {job}: the game's reward, the plan's coded skills as macro actions",
               KEPT: "kept plan: the plan's chain with policy {job} stepping in, on the game's reward"}
"""The final evaluation's controller, as the report and bench-game read it, per policy candidate."""


def macro_frames(ctx: RunContext, both: bool) -> int | None:
    """A's frames (module docstring); ``both``: B may train after it. None: unbounded."""
    left = ctx.frames_left()
    if left is None:
        return None
    alone = max(0, left - ctx.evaluation_hold())
    return alone // 2 if both and alone // 2 >= trainings.MIN_FRAMES else alone


def enough(frames: int | None) -> bool:
    return frames is None or frames >= trainings.MIN_FRAMES


def train(ctx: RunContext, attempts: Attempts, plan: planner_pb2.Plan | None) -> None:
    """A, then B, each where possible and with frames (module docstring); a resumed run trains what is left, a
    training under way going on to the frames it was given (:mod:`services.planner.game_resume`)."""
    if plan is None:
        return
    task = ctx.run.request.task.name
    if game_controller.possible(ctx, plan):
        frames = game_resume.frames_of(ctx, game_controller.controller_name(task),
                                       macro_frames(ctx, both=game_kept_plan.possible(ctx, plan)))
        if enough(frames):
            game_controller.train(ctx, attempts, plan, frames)
    if game_kept_plan.possible(ctx, plan):
        frames = game_resume.frames_of(ctx, kept_plan_name(task), game_controller.training_frames(ctx))
        if enough(frames):
            game_kept_plan.train(ctx, attempts, plan, frames)


def candidates(state: RunState) -> list[planner_pb2.ControllerScore]:
    """The chain and each policy trained after the iterations (a game record), with its score and frames."""
    best = state.best or {}
    chain = planner_pb2.ControllerScore(name=CHAIN, frames=sum(int(it.get("frames", 0)) for it in state.iterations))
    if best.get("score") is not None:
        chain.score = float(best["score"])
    else:
        chain.error = "no chain was scored"
    out = [chain]
    for name, record in ((MACRO, state.game_controller), (KEPT, state.kept_plan)):
        if record is None or "chain_score" not in record:  # not trained (or a goal task's kept plan)
            continue
        scored = planner_pb2.ControllerScore(name=name, frames=int(record.get("frames", 0)),
                                             job_id=str(record.get("job_id", "")), error=str(record.get("error", "")))
        if record.get("score") is not None and record.get("job_id"):
            scored.score = float(record["score"])
        out.append(scored)
    return out


def chosen(state: RunState) -> planner_pb2.FinalControllers:
    """The candidates and the one with the highest score (the earlier among equals; the chain when none scored)."""
    found = candidates(state)
    pick = CHAIN
    top = found[0].score if found[0].HasField("score") else None
    for candidate in found[1:]:
        if candidate.HasField("score") and (top is None or candidate.score > top):
            pick, top = candidate.name, candidate.score
    return planner_pb2.FinalControllers(controllers=found, chosen=pick)


def record_of(state: RunState, name: str) -> dict[str, Any]:
    """A policy candidate's record (``state.game_controller`` or ``state.kept_plan``)."""
    return (state.game_controller if name == MACRO else state.kept_plan) or {}


def evaluate(ctx: RunContext, *, episodes: int, seed: int, animate: int = 0) -> FinalResult:
    """The chosen controller's final evaluation on the game's episodes (measured by its score, its frames
    counted), the choice emitted first."""
    choice = chosen(ctx.state)
    ctx.run.emit(final_controllers=choice)
    log.info("final controller: %s (%s)", choice.chosen, ", ".join(
        f"{c.name} {c.score:.1f}" if c.HasField("score") else f"{c.name} not scored" for c in choice.controllers))
    if choice.chosen == CHAIN:
        return final_evaluation(ctx, animate=animate)
    job = str(record_of(ctx.state, choice.chosen)["job_id"])
    result = FinalResult(episodes=episodes, frames_used=ctx.state.frames_used, seed=seed,
                         controller=CONTROLLERS[choice.chosen].format(job=job))
    return measured(ctx, learner_evaluation(ctx, learner_pb2.EvaluateRequest(
        job_id=job, episodes=episodes, seed=seed, episode_length=ctx.episode_cap(),
        animate=animate), result, f"final ({choice.chosen})"))
