"""A run's numbers from the planner's event stream (``WatchRun``), the only view of a run a client has."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlgpt.v1 import planner_pb2

DECISIONS = {planner_pb2.DECISION_CODE: "code", planner_pb2.DECISION_RL: "rl"}


def run_numbers(events: Iterable[planner_pb2.RunEvent]) -> dict[str, Any]:
    """Final success, LLM tokens, training and skill-test frames, training frames to the first success, the
    run's frames in all and its final controller (from ``run_end``), last plan, error, and the whole task's
    success after each outer iteration (``iterations``, from ``iteration_end``, indexed by the event's
    ``iteration``; None where the chain was not evaluated) with the chain each evaluated or why none ran
    (``iteration_controllers``). A run that ends before its last outer iteration has fewer entries.

    Training frames are summed over the run's jobs (each job's last progress); the first success is the first
    progress record with a success rate above zero, counted on the frames of the jobs before it plus its own.
    """
    job_frames: dict[str, int] = {}
    numbers: dict[str, Any] = {"success_rate": 0.0, "ended": False, "tokens": 0, "training_frames": 0,
                               "skill_test_frames": 0, "frames_used": None, "controller": "",
                               "frames_to_first_training_success": None, "plan": "", "error": "", "iterations": [],
                               "iteration_controllers": []}
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "llm":
            numbers["tokens"] += event.llm.prompt_tokens + event.llm.completion_tokens
        elif kind == "training":
            progress = event.training
            job_frames[progress.job_id] = int(progress.env_frames)
            if numbers["frames_to_first_training_success"] is None and progress.success_rate > 0:
                numbers["frames_to_first_training_success"] = sum(job_frames.values())
        elif kind == "plan":
            numbers["plan"] = ", ".join(f"{s.name} ({DECISIONS.get(s.decision, '?')})" for s in event.plan.subtasks)
        elif kind == "code":
            numbers["skill_test_frames"] += int(event.code.frames)
        elif kind == "iteration_end":
            end = event.iteration_end
            rates, controllers = numbers["iterations"], numbers["iteration_controllers"]
            missing = end.iteration + 1 - len(rates)  # an iteration without its event stays None
            rates.extend([None] * missing)
            controllers.extend([""] * missing)
            rates[end.iteration] = float(end.success_rate) if end.HasField("success_rate") else None
            controllers[end.iteration] = end.controller
        elif kind == "run_end":
            end = event.run_end
            numbers.update(success_rate=float(end.success_rate), ended=True, frames_used=int(end.frames_used),
                           controller=end.controller)
        elif kind == "error":
            numbers["error"] = event.error.message
    numbers["training_frames"] = sum(job_frames.values())
    return numbers
