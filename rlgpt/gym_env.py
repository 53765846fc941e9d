"""The one ``gymnasium.Env`` over one env of an env-server session: ``SessionEnv`` steps anything that follows
``OneEnv`` (a ``RemoteSession``, or an in-process session), so frame counting and per-episode stats are written
once; ``RemoteEnv`` is a single-env session on a server at an address, for scripts and RL libraries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from rlgpt.env_client import EnvStep, Observation, RemoteSession
from rlgpt.env_contract import is_macro
from rlgpt.v1 import common_pb2, env_pb2


class OneEnv(Protocol):
    """One env of a session, as ``SessionEnv`` steps it."""

    actions: list[str]
    image_shape: tuple[int, ...]
    """One image, HWC."""
    vector_shape: tuple[int, ...]

    def initial_observation(self) -> Observation:
        """The observation the session was created with (a new session starts reset)."""
        ...

    def reset_env(self, seed: int = 0) -> Observation:
        """Starts the next episode; a non-zero ``seed`` restarts the session's world sequence."""
        ...

    def step_env(self, action: int) -> EnvStep: ...

    def close(self) -> None: ...


@dataclasses.dataclass
class EpisodeStats:
    """What one episode consumed; reported in ``info["episode_extra_stats"]`` when it ends."""

    frames: int = 0
    skill_frames: int = 0
    skill_uses: int = 0
    skill_errors: int = 0
    achievements: int = 0

    def as_info(self, success: bool) -> dict[str, float]:
        return {"success": float(success), "frames": float(self.frames), "skill_frames": float(self.skill_frames),
                "skill_uses": float(self.skill_uses), "skill_errors": float(self.skill_errors),
                "achievements": float(self.achievements)}


class SessionEnv(gym.Env[Observation, int]):
    """One env of a session as a gymnasium env: Dict(image uint8, vector float32), Discrete(actions).

    A skill action may consume up to K frames: ``info["frames"]`` says how many, and when an episode ends
    ``info["episode_extra_stats"]`` sums its frames, skill frames, skill uses, skill errors and achievements,
    so frame budgets and FPS count frames, not decisions (Sample Factory reads that key).

    - ``channels_first``: images CHW (what Sample Factory's conv encoders want) instead of HWC as served.
    - ``reseed``: a ``reset(seed=s)`` restarts the session's worlds from ``s`` (gymnasium's meaning). Off,
      reset seeds are ignored and the session's own seed decides the worlds (Sample Factory passes env indices).
      A reset without a seed right after the session was created returns the session's first observation,
      with no round trip: env 0 of a session with seed s plays world s first either way.
    - ``end_on_skill_error``: a failing skill ends (truncates) the episode; it is counted either way.
    """

    metadata = {"render_modes": []}

    def __init__(self, session: OneEnv, *, channels_first: bool = False, reseed: bool = True,
                 end_on_skill_error: bool = False):
        self._session = session
        self._channels_first = channels_first
        self._reseed = reseed
        self._end_on_skill_error = end_on_skill_error
        self.action_names = list(session.actions)
        self.skill_actions = {i for i, name in enumerate(self.action_names) if is_macro(name)}
        height, width, channels = session.image_shape
        self.action_space = gym.spaces.Discrete(len(self.action_names))
        self.observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 255, (channels, height, width) if channels_first else (height, width, channels),
                                    np.uint8),
            # Finite bounds: positions and counts are large but never infinite.
            "vector": gym.spaces.Box(-1e6, 1e6, tuple(session.vector_shape), np.float32),
        })
        self._fresh = True  # a new session starts reset
        self._stats = EpisodeStats()

    def _observation(self, obs: Observation) -> Observation:
        image = obs["image"]
        if self._channels_first:
            image = np.ascontiguousarray(image.transpose(2, 0, 1))
        return {"image": image, "vector": obs["vector"].copy()}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        self._stats = EpisodeStats()
        world_seed = seed if seed and self._reseed else 0
        if self._fresh and not world_seed:
            obs = self._session.initial_observation()
        else:
            obs = self._session.reset_env(world_seed)
        self._fresh = False
        return self._observation(obs), {}

    def step(self, action: int) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        action = int(action)
        out = self._session.step_env(action)
        stats = self._stats
        stats.frames += out.frames
        stats.achievements += len(out.achievements)
        if action in self.skill_actions:
            stats.skill_uses += 1
            stats.skill_frames += out.frames
        terminated, truncated = out.terminated, out.truncated
        info: dict[str, Any] = {"frames": out.frames, "success": out.success, "achievements": out.achievements,
                                "episode_steps": out.episode_steps, "skill_finished": out.skill_finished}
        if out.skill_error is not None:
            stats.skill_errors += 1
            info["skill_error"] = out.skill_error
            if self._end_on_skill_error:
                truncated = truncated or not terminated
        if terminated or truncated:
            info["episode_extra_stats"] = stats.as_info(out.success)
        return self._observation(out.observation), out.reward, terminated, truncated, info

    def close(self) -> None:
        self._session.close()


class RemoteEnv(SessionEnv):
    """A single-env session on the env server at ``target`` as a gymnasium env (images HWC, as served).

    Passes gymnasium's ``check_env``; ``reset(seed=s)`` replays the worlds of seed ``s``.
    """

    def __init__(self, target: str, *, task: str = "", backend: str = "crafter", seed: int = 0,
                 skills: Sequence[str] = (), primitive_actions: Sequence[str] = (), skill_max_steps: int = 0,
                 episode_length: int = 0, reward_terms: Sequence[common_pb2.RewardTerm] = (),
                 start_inventory: dict[str, int] | None = None, timeout: float = 60.0):
        task_spec = common_pb2.TaskSpec(name=task, start_inventory=[
            common_pb2.ItemCount(item=k, count=v) for k, v in (start_inventory or {}).items()])
        # autoreset off: gymnasium's contract is that the caller resets after an episode ends.
        super().__init__(RemoteSession.connect(target, env_pb2.CreateSessionRequest(
            backend=backend, task=task_spec, seed=seed, num_envs=1, skills=list(skills),
            primitive_actions=list(primitive_actions), skill_max_steps=skill_max_steps,
            episode_length=episode_length, reward_terms=list(reward_terms), autoreset=False,
            client="gymnasium"), timeout=timeout))
