"""What the tests of whole `rlgpt run`s against a scripted LLM (test double) share: the answers of a one-subtask
run that gets wood by code, and the small budget such a run gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlgpt.app.runner import RunOptions
from services.env_server.skills.reference import COLLECT_WOOD

PLAN = {"rationale": "wood by code", "subtasks": [
    {"name": "get_wood", "description": "collect wood", "success": [{"achievement": "collect_wood"}],
     "decision": "code", "skills": []}]}
VERDICT = {"success": True, "diagnosis": "scripted critic", "suggestion": "keep", "target": "keep"}
WOOD_ANSWERS: dict[str, Any] = {
    "Plan": PLAN, "SkillAnswer": {"name": "get_wood", "description": "chop", "code": COLLECT_WOOD},
    "CriticAnswer": VERDICT}
"""The scripted answer to each response schema, by the schema's name."""


def options(runs_dir: Path, **overrides: Any) -> RunOptions:
    """A one-iteration rl-gpt run of collect_wood under ``runs_dir`` (6000 frames, 2 eval episodes, seed 3)."""
    fields: dict[str, Any] = dict(
        task="collect_wood", success="", mode="rl-gpt", agents="slow-fast-critic", resume=None, runs_dir=runs_dir,
        outer=1, inner=1, frames_per_training=1000, total_frames=6000, eval_episodes=2, candidates=1, seed=3)
    fields.update(overrides)
    return RunOptions(**fields)
