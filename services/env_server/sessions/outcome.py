"""What one batched step of a session gives back, per env (rewards, episode ends, frames used, infos)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


@dataclasses.dataclass
class StepOutcome:
    """Per-env results of one batched step."""

    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    frames: np.ndarray
    infos: list[dict[str, Any]]

    @classmethod
    def empty(cls, n: int) -> StepOutcome:
        """The outcome of ``n`` envs before any frame: nothing earned, nothing ended."""
        return cls(rewards=np.zeros(n, np.float32), terminated=np.zeros(n, bool), truncated=np.zeros(n, bool),
                   frames=np.zeros(n, np.int32), infos=[{"achievements": []} for _ in range(n)])

    def rows(self, indices: list[int]) -> StepOutcome:
        """The outcome of the listed envs only, in that order."""
        return StepOutcome(rewards=self.rewards[indices], terminated=self.terminated[indices],
                           truncated=self.truncated[indices], frames=self.frames[indices],
                           infos=[self.infos[i] for i in indices])
