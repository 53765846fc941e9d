"""What recording sessions (RunSkill, evaluation) write about an episode: a trajectory recorder per
episode, one event per frame, and the episode's summary with its bounded text (trajectory.py writes the
lines)."""

from __future__ import annotations

from typing import Any

from services.env_server.backends.base import Backend
from services.env_server.sessions.episode import EnvSlot
from services.env_server.sessions.trajectory import TrajectoryRecorder
from services.env_server.sessions.trajectory_reading import watch_names
from services.env_server.tasks import Task

SUMMARY_TEXT_CHARS = 8000
"""EpisodeSummary.text is cut to this many characters."""


def recorder_for(backend: Backend, task: Task) -> TrajectoryRecorder:
    """A trajectory recorder that watches for what the task needs (from the world's rules)."""
    rules = backend.spec.rules() if backend.spec.rules is not None else None
    return TrajectoryRecorder(watch_names(rules, task.achievements, [item for item, _ in task.inventory]))


def record_frame(slot: EnvSlot, action: str, new: list[str], gained: dict[str, int],
                 inventory: dict[str, int]) -> None:
    """Adds one frame of ``slot``'s episode to its trajectory; ``inventory`` is after the frame, the
    episode's own still before it."""
    episode = slot.episode
    assert episode.trajectory is not None
    lost = {k: episode.inventory.get(k, 0) - v for k, v in inventory.items() if v < episode.inventory.get(k, 0)}
    episode.trajectory.frame(episode.steps, action, slot.perception(), gained, lost, new)


def episode_summary(slot: EnvSlot) -> dict[str, Any]:
    """What ``slot``'s current episode did, for RunSkill and the critic."""
    episode = slot.episode
    reason = episode.end_reason or ("error" if episode.error else "skill_finished")
    if episode.success and reason in ("skill_finished", "time_limit"):
        reason = "success"
    closing = [f"end: {reason} at step {episode.steps}, near {slot.env.nearby_text()}"]
    if episode.death_cause:
        closing.append(f"death: {episode.death_cause}")
    if episode.error:
        closing.append(f"error: {episode.error['type']} line {episode.error.get('line', 0)}: "
                       f"{episode.error['message']}")
    text = episode.trajectory.text(closing) if episode.trajectory is not None else "\n".join(closing)
    return {
        "success": episode.success, "steps": episode.steps, "episode_return": episode.episode_return,
        "error": episode.error, "achievements": list(episode.unlocked), "death_cause": episode.death_cause,
        "text": text[:SUMMARY_TEXT_CHARS], "end_reason": reason,
        "final_inventory": {k: v for k, v in episode.inventory.items() if v}, "animation": episode.animation,
        "stages_done": list(episode.stages_done), "stage_frames": list(episode.stage_frames),
    }
