"""The observation space of the learner's env and of a loaded policy, built from the env server's observation
fields; the vector's scale (Describe's ``ObservationField.scale``) rides along for the model; and a job's action
names, in its policy's index order."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from rlgpt.env_contract import PLAN_ACTION, SKILL_PREFIX
from rlgpt.v1 import learner_pb2


class VectorBox(gym.spaces.Box):
    """The observation vector's Box, carrying what a network divides it by (0: not scaled), so the model reads the
    scale from the space it is built for (Sample Factory hands the model the env's own space)."""

    def __init__(self, shape: Sequence[int], scale: float):
        # Finite bounds: positions and counts are large but never infinite.
        super().__init__(-1e6, 1e6, tuple(shape), np.float32)
        self.scale = float(scale)


def observation_space(image_shape: Sequence[int], vector_shape: Sequence[int], vector_scale: float
                      ) -> gym.spaces.Dict:
    """``{"image": uint8 CHW, "vector": float32}`` for an env server's (H, W, C) image and its vector."""
    height, width, channels = image_shape
    return gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (channels, height, width), np.uint8),
                            "vector": VectorBox(vector_shape, vector_scale)})


def job_actions(config: learner_pb2.RLConfig, primitives: Sequence[str]) -> list[str]:
    """A job's own action names in its index order: its primitives (all ``primitives`` when it names none), its
    skills, its plan."""
    return (list(config.primitive_actions or primitives) + [SKILL_PREFIX + s for s in config.skills]
            + ([PLAN_ACTION] if config.plan else []))
