"""A run directory read as numbers: task, budgets, plan, final success (a whole-game run: its final evaluation's
score), frames, sub-task results, LLM calls and the wall time of the whole run, for a kept record (docs/runs/NAME)
and for its replay alike; and the run's id, which a kept record's folder name is not."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.replay.drift import llm_calls
from rlgpt.app.runner import recorded_request
from rlgpt.env_contract import GAME_OBJECTIVE

WALL_FROM = "the start of the first LLM call"
"""Where a run's wall time starts. The run's first event is the first LLM call's, written when the call ends, so
the call's own latency is added to the span of the events (a record kept before ``wall_from`` was saved counted
from that event: its first call is added when it is read)."""


PASSED_CHECK = re.compile(r"success_rate [0-9.]+ >= threshold")
"""The critic's own line for an attempt whose measured rate passed, as its prompts show it."""


def critic_asked_on_pass(calls: list[dict[str, Any]]) -> bool:
    """Whether a record's critic was asked about attempts that passed (its prompt shows the passed check): records
    made before the critic stopped asking its LLM then (RLGPT_CRITIC_LLM_ON_PASS off by default since 2026-11-28),
    which a replay repeats only with the setting on."""
    return any(c["agent"] == "critic" and PASSED_CHECK.search(str(c.get("messages", ""))) for c in calls)


def first_call_seconds(calls: list[dict[str, Any]]) -> float:
    """How long the run's first LLM call took (0 without calls)."""
    return float(calls[0].get("latency_seconds", 0.0)) if calls else 0.0


def wall_seconds(run_dir: Path, calls: list[dict[str, Any]]) -> float | None:
    """From the start of the run's first LLM call to its last event; None without two events."""
    events = run_dir / "events.jsonl"
    if not events.exists():
        return None
    times = [float(json.loads(line)["time"]) for line in events.read_text().splitlines() if line.strip()]
    if len(times) < 2:
        return None
    return round(times[-1] - times[0] + first_call_seconds(calls), 1)


def _first_event_run_id(run_dir: Path) -> str:
    events = run_dir / "events.jsonl"
    lines = events.read_text().splitlines() if events.exists() else []
    return str(json.loads(lines[0]).get("runId", "")) if lines and lines[0].strip() else ""


def run_id_of(run_dir: Path) -> str:
    """The run's id, which names the skills it registered (``<sub-task>__chain<last 6 of the id>``): its
    status.json's, a kept record's ``recorded.json`` ``run_id`` (docs/runs/NAME is named by hand), its events',
    else its folder's name (the planner names a run's folder by its id)."""
    for path, key in ((run_dir / "status.json", "runId"), (run_dir / "recorded.json", "run_id")):
        found = str(json.loads(path.read_text()).get(key, "")) if path.exists() else ""
        if found:
            return found
    return _first_event_run_id(run_dir) or run_dir.name


def run_summary(run_dir: Path) -> dict[str, Any]:
    """Task, budgets, plan, final success, frames, each sub-task's best test, LLM calls and wall time of a run. A
    whole-game run (task objective "game") has no success condition: its measure is ``score``, the game's score of
    its own final evaluation (the run's final worlds, not held-out ones), and its ``success_rate`` is None; a run
    with a success condition has ``score`` None."""
    state = json.loads((run_dir / "state.json").read_text())
    request = recorded_request(run_dir)
    calls = llm_calls(run_dir / "llm")
    final = state.get("final") or {}
    budgets = request.budgets
    game = request.task.objective == GAME_OBJECTIVE
    # Sub-tasks of a plan only: a final controller's candidates (RL around the kept plan, the game's macro-action
    # policy) keep their trainings under names of their own, not a sub-task's tests.
    planned = {st["name"] for doc in [*state.get("plans", []), state.get("plan") or {}]
               for st in doc.get("subtasks", [])}
    return {"task": request.task.name, "success_rate": None if game else final.get("success_rate"),
            "score": final.get("score") if game else None, "finished": state.get("finished"),
            "controller": final.get("controller", ""), "frames_used": state.get("frames_used", 0),
            "budgets": {f.name: getattr(budgets, f.name) for f in budgets.DESCRIPTOR.fields
                        if budgets.HasField(f.name)},
            "plan": [s["name"] + f" ({s.get('decision', '')})".replace("DECISION_", "").lower()
                     for s in state.get("plan", {}).get("subtasks", [])],
            "subtask_best": {name: max((t.get("success_rate", 0.0) for t in sub.get("tests", [])), default=0.0)
                             for name, sub in state.get("subtasks", {}).items() if name in planned},
            "llm_calls": len(calls), "llm_calls_by_agent": dict(sorted(Counter(c["agent"] for c in calls).items())),
            "tokens": sum(c.get("prompt_tokens", 0) + c.get("completion_tokens", 0) for c in calls),
            "wall_seconds": wall_seconds(run_dir, calls), "wall_from": WALL_FROM}


def kept_runs(runs: Path) -> list[Path]:
    """The kept records under ``runs`` (docs/runs): folders with a ``recorded.json``, by name."""
    return sorted(p for p in runs.iterdir() if (p / "recorded.json").exists()) if runs.is_dir() else []


def recorded_entry(source: Path) -> dict[str, Any]:
    """A kept record's numbers as it was recorded: its folder read now (a kept folder has no events, so no wall
    time) and its ``recorded.json`` (model, date, the recorded wall time); the wall time counts the whole run."""
    kept = json.loads((source / "recorded.json").read_text())
    entry = run_summary(source) | kept
    if kept.get("wall_from") != WALL_FROM and kept.get("wall_seconds") is not None:
        first_call = first_call_seconds(llm_calls(source / "llm"))
        entry |= {"wall_seconds": round(kept["wall_seconds"] + first_call, 1), "wall_from": WALL_FROM}
    return entry
