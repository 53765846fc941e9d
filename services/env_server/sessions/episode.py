"""Per-env bookkeeping of a session: each env's current observation, perception cache and episode stats."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from rlgpt.frames import FrameSampler
from services.env_server.backends.base import BackendEnv
from services.env_server.sessions.trajectory import TrajectoryRecorder


@dataclasses.dataclass
class Episode:
    """Task bookkeeping of one env's current episode."""

    steps: int = 0
    episode_return: float = 0.0
    unlocked: list[str] = dataclasses.field(default_factory=list)
    success: bool = False
    stages_done: list[bool] = dataclasses.field(default_factory=list)
    """Per stage of the session, whether its conditions have held (sticky, as ``success``)."""
    stage_frames: list[int] = dataclasses.field(default_factory=list)
    """Per stage, the episode step at which its conditions first held; 0 while they have not."""
    inventory: dict[str, int] = dataclasses.field(default_factory=dict)
    health: float = 0.0
    end_reason: str = ""
    death_cause: str = ""
    error: dict[str, Any] | None = None
    trajectory: TrajectoryRecorder | None = None
    """Compact event log, kept only by recording sessions (RunSkill, evaluation)."""
    in_prefix: bool = False
    """The session's prefix is running (no reward, no task or stage judged, no time limit, nothing recorded)."""
    prefix_steps: int = 0
    """Env frames the prefix took before the client's first observation (counted in ``steps``, not toward the
    episode length)."""
    animation: bytes = b""
    """The episode's GIF, once it ended among those its session animates (EpisodeSummary.animation)."""

    def __post_init__(self) -> None:
        if not self.stage_frames:  # one per stage, as stages_done
            self.stage_frames = [0] * len(self.stages_done)


class EnvSlot:
    """One env of a session with its current observation and episode."""

    def __init__(self, env: BackendEnv):
        self.env = env
        self.image: np.ndarray | None = None
        self.vector: np.ndarray | None = None
        self.episode = Episode()
        self.episodes_started = 0
        self.seed = 0
        """The seed of the current episode's world."""
        self.animation: FrameSampler | None = None
        """The frames the client's episode showed, kept while the session may animate it."""
        self.needs_reset = False
        self._perception: dict[str, Any] | None = None

    def perception(self) -> dict[str, Any]:
        """What the player perceives now; computed once per frame (a recorded skill frame needs it twice)."""
        if self._perception is None:
            self._perception = self.env.perception()
        return self._perception

    def changed(self) -> None:
        """The env moved on (step, reset, items given): the next perception() reads it afresh."""
        self._perception = None
