"""What one outer iteration cost (LLM tokens, seconds, env frames), counted over the whole iteration when a pause,
crash or stop split it across planner processes: a resumed iteration counts from where it first began, not from
the resume.

The iteration's start (its frames then, the seconds it had run in earlier processes, when this process's part
began) is kept in ``RunState.iteration_start``. Its tokens are those of its LLM calls in the run's events (every
call is an event tagged with its iteration, appended to ``events.jsonl`` as it happens, so a resume reads them
back). Its seconds are working seconds: the time a run lay paused between two processes is not counted (an
earlier process's part ends with its last event)."""

from __future__ import annotations

import time
from typing import Any

from services.planner.runs import Run
from services.planner.state import RunState


def begin_iteration(state: RunState, iteration: int, previous_end: float | None) -> dict[str, Any]:
    """Starts (or, on a resume, goes on with) ``iteration``'s count and keeps it in ``state``; ``previous_end``:
    the time of the last event an earlier process wrote (None for a run this process started)."""
    now = time.time()
    start = state.iteration_start
    if start is not None and int(start.get("iteration", -1)) == iteration:
        since = float(start["since"])
        earlier = max(0.0, (previous_end if previous_end is not None else since) - since)
        start = {**start, "seconds": float(start.get("seconds", 0.0)) + earlier, "since": now}
    else:
        start = {"iteration": iteration, "frames": state.frames_used, "seconds": 0.0, "since": now}
    state.iteration_start = start
    return start


def iteration_frames(state: RunState, start: dict[str, Any]) -> int:
    """The env frames the run spent since the iteration ``start`` (:func:`begin_iteration`) began."""
    return state.frames_used - int(start["frames"])


def iteration_tokens(run: Run, iteration: int) -> int:
    """The LLM tokens of ``iteration``'s calls, in every process that worked on it (the run's events)."""
    return sum(e.llm.prompt_tokens + e.llm.completion_tokens for e in list(run.events)
               if e.WhichOneof("payload") == "llm" and e.iteration == iteration)


def iteration_seconds(start: dict[str, Any]) -> float:
    """The working seconds since the iteration ``start`` (:func:`begin_iteration`) began, in every process."""
    return float(start.get("seconds", 0.0)) + max(0.0, time.time() - float(start["since"]))
