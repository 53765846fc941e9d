"""A game run's final-controller candidates (:mod:`services.planner.game_final`) across a stop: what a candidate
has when its run stops is kept in ``RunState.under_way`` until its record is stored, so that a resumed run redoes
none of it.

- A candidate recorded before the stop (trained and scored, or refused) is not trained again (its ``possible``).
- The fast agent's config answer is kept as it arrives (an unusable one's error too): a resume uses it and asks
  nothing (no second LLM call, no second answer to one decision in the run's records).
- A training under way goes on with its job, from the job's latest checkpoint to the frames it was given
  (:class:`~services.planner.trainings.Resume`); the frames the job trained before the stop are counted once. A job
  that had finished is only evaluated (its curve not extended again). Where the learner lost the job, a new one trains
  what it left; with fewer than :data:`~services.planner.trainings.MIN_FRAMES` left, none: the candidate's error.

The candidate's record says what was resumed (``resumed``), and the training's event where its job resumed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlgpt.llm.client import StructuredOutputError
from services.planner.agents.kept_plan import KeptPlanAnswer, answer_form, answer_of
from services.planner.context import RunContext
from services.planner.state import SubTaskState
from services.planner.trainings import Resume

FROM_BEFORE = "its config from before the stop"


def kept(ctx: RunContext, name: str) -> dict[str, Any]:
    """The candidate ``name``'s work under way (empty: none yet), kept in the run's state."""
    return ctx.state.under_way.setdefault(name, {})


def done(ctx: RunContext, name: str) -> None:
    """The candidate's record is stored: nothing of it is under way (saved with the record)."""
    ctx.state.under_way.pop(name, None)


def frames_of(ctx: RunContext, name: str, offered: int | None) -> int | None:
    """A candidate's training frames: those its job was given where one is under way (it goes on to them, whatever
    is left now), else ``offered``."""
    going, sub = ctx.state.under_way.get(name, {}), ctx.state.subtasks.get(name)
    return int(going["env_frames"]) if sub is not None and sub.job_id and "env_frames" in going else offered


def recorded(ctx: RunContext, name: str, ask: Callable[[Any], KeptPlanAnswer]) -> Callable[[Any], KeptPlanAnswer]:
    """``ask`` (the fast agent's one LLM call for the candidate's config) with its answer kept in the run's state as
    it arrives; the answer kept before a stop, where there is one, instead of asking again (an unusable one raises
    its error again, without a call to record)."""
    going = kept(ctx, name)

    def answer(fast: Any) -> KeptPlanAnswer:
        if "answer" in going:
            if going["answer"] is None:
                raise StructuredOutputError(str(going.get("config_error", "")))
            return answer_of(going["answer"])
        try:
            got = ask(fast)
        except StructuredOutputError as exc:
            going.update(answer=None, config_error=str(exc))
            ctx.save()
            raise
        going["answer"] = answer_form(got)
        ctx.save()
        return got

    return answer


def resume_of(ctx: RunContext, name: str, state: SubTaskState, reused: bool) -> Resume | None:
    """The candidate's job to go on with (the sub-task's job, started before the stop), or None: none started.
    ``reused``: its config is the one from before the stop."""
    going = ctx.state.under_way.get(name, {})
    if not state.job_id or "before" not in going:
        return None
    return Resume(state.job_id, spent=state.frames - int(going["before"]), said=FROM_BEFORE if reused else "")


def resumed_text(resume: Resume | None, reused: bool) -> str:
    """What the candidate took over from before the stop, in words ("" for nothing)."""
    if resume is not None and resume.at is not None:
        return resume.message
    if resume is not None:  # the learner had lost the job or could not resume it
        return ", ".join(p for p in ("a new job trained: the stopped one could not resume", resume.said) if p)
    return FROM_BEFORE if reused else ""
