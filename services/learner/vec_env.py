"""Sample Factory's batched env over env-server sessions: a rollout worker's envs live in one session.

Sample Factory's batched sampling (``--batched_sampling=True``) gives each rollout worker one vector env per
split (double-buffered sampling has two) and steps it with one call per rollout step. ``SessionVecEnv`` is that
vector env: a group of envs of one session, stepped with one ``Step`` naming them (``env_indices``), so the
splits of a worker share one session and each step is one round trip for all of its envs. The server resets
finished envs itself (autoreset); a failing skill ends its episode here with one ``Reset`` for that env.

Per episode the env reports the frames it consumed (a skill action takes up to K; the frames of its chain prefix,
``RLConfig.prefix``, which the env server ran before its first observation, count too), skill frames, uses, errors,
achievements, success and its decisions per action, under ``info["episode_extra_stats"]`` as tensors over the
group, which Sample Factory turns into per-episode stats for the finished envs.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlgpt.env_client import ManyEnvs, Observation
from rlgpt.env_contract import is_macro
from services.learner.frame_budget import FrameMeter
from services.learner.spaces import observation_space

EXTRA_STATS = ("success", "frames", "skill_frames", "skill_uses", "skill_errors", "achievements")
"""The per-episode stats the env reports (``info["episode_extra_stats"]``)."""
CHOICES = "choices"
"""Under this key of the extra stats, the episode's decisions per action, keyed by :func:`choice_key`."""


def choice_key(action: str) -> str:
    """An action's name as a stat key: Sample Factory writes every stat to TensorBoard, whose tags allow only
    letters, digits, ``_``, ``-`` and ``.``, so any other character is escaped as ``.`` and two hex digits."""
    return re.sub(r"[^A-Za-z0-9_-]", lambda m: "".join(f".{b:02x}" for b in m.group().encode()), action)


def choice_action(key: str) -> str:
    """The action a :func:`choice_key` names."""
    return re.sub(r"(?:\.[0-9a-f]{2})+", lambda m: bytes.fromhex(m.group().replace(".", "")).decode(), key)


def prefix_frames(session: ManyEnvs, rows: int, first: bool = False) -> np.ndarray:
    """The frames the chain prefix took before the observations ``session`` last returned (``rows`` of them; with
    ``first``, those it was created with, one per env): zeros where the session tells none (not a ``RemoteSession``,
    e.g. the benchmark's in-process session)."""
    told = getattr(session, "first_prefix_frames" if first else "prefix_frames", None)
    return np.zeros(rows, np.int64) if told is None or len(told) != rows else np.asarray(told, np.int64)


class SessionVecEnv(gym.Env):
    """Envs ``indices`` of ``session`` as one Sample Factory vector env: Dict(image uint8 CHW, vector float32),
    Discrete(actions), ``num_agents`` = the group's size.

    ``on_close`` runs instead of closing the session (a shared session is closed by its last user); ``meter``
    counts the frames each step spent and, once the job's budget is spent, stops stepping the session
    (``frame_budget``): the envs answer their last observations again, without reward, frames or an end.
    """

    metadata = {"render_modes": []}
    is_multiagent = True

    def __init__(self, session: ManyEnvs, indices: Sequence[int], *, end_on_skill_error: bool = True,
                 on_close: Callable[[], None] | None = None,
                 on_episode: Callable[[dict[str, Any]], None] | None = None, meter: FrameMeter | None = None):
        self._session = session
        self._meter = meter
        self._last: Observation | None = None
        self._closed = False
        self._on_episode = on_episode
        self._unlocked: list[set[str]] = [set() for _ in indices]
        self._indices = list(indices)
        self._end_on_skill_error = end_on_skill_error
        self._on_close = on_close
        self.num_agents = len(self._indices)
        self.action_names = list(session.actions)
        self._skill_ids = np.array([i for i, name in enumerate(self.action_names) if is_macro(name)],
                                   np.int64)
        self.action_space = gym.spaces.Discrete(len(self.action_names))
        self.observation_space = observation_space(session.image_shape, session.vector_shape, session.vector_scale)
        self._fresh = True
        self._sums = {key: np.zeros(self.num_agents, np.float64) for key in EXTRA_STATS if key != "success"}
        self._returns = np.zeros(self.num_agents, np.float64)
        # Decisions per action of each env's episode: what the policy chose (the episode records, the progress).
        self._choices = np.zeros((self.num_agents, len(self.action_names)), np.int64)
        self._rows = np.arange(self.num_agents)

    @staticmethod
    def _observation(obs: Observation) -> Observation:
        return {"image": np.ascontiguousarray(obs["image"].transpose(0, 3, 1, 2)),
                "vector": np.ascontiguousarray(obs["vector"], np.float32)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Observation, list[dict[str, Any]]]:
        """The group's first observations: the session's own on first use (no round trip), else a Reset."""
        super().reset(seed=seed)
        for total in self._sums.values():
            total[:] = 0
        self._returns[:] = 0
        self._choices[:] = 0
        self._unlocked = [set() for _ in self._indices]
        if self._fresh:
            obs = {k: v[self._indices] for k, v in self._session.first_observations.items()}
            prefix = prefix_frames(self._session, self._session.num_envs, first=True)[self._indices]
        else:
            obs = self._session.reset(self._indices)
            prefix = prefix_frames(self._session, self.num_agents)
        self._sums["frames"] += prefix  # the prefix's frames are the new episodes' first
        if self._meter is not None:
            self._meter.add(int(prefix.sum()))
        self._fresh = False
        self._last = self._observation(obs)
        return self._last, [{} for _ in self._indices]

    def step(self, actions: Any) -> tuple[Observation, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        acts = np.asarray(actions.cpu() if isinstance(actions, torch.Tensor) else actions, np.int64).reshape(-1)
        if self._meter is not None and self._last is not None and self._meter.over():
            self._meter.idle()
            none = np.zeros(self.num_agents, bool)
            return self._last, np.zeros(self.num_agents, np.float32), none, none.copy(), {}
        batch = self._session.step_envs(acts.tolist(), self._indices)
        if self._meter is not None:
            self._meter.add(int(batch.frames.sum()))  # all of them: its own, skills', an autoreset's prefix
        # An env reset by the server ran the next episode's prefix: its frames are in the step's, the next episode's.
        carried = prefix_frames(self._session, len(acts)).copy()
        own = batch.frames - carried
        obs = batch.observation
        terminated, truncated = batch.terminated.copy(), batch.truncated.copy()
        skill = np.isin(acts, self._skill_ids)
        sums = self._sums
        sums["frames"] += own
        sums["achievements"] += batch.achievements
        sums["skill_uses"] += skill
        sums["skill_frames"] += np.where(skill, own, 0)
        sums["skill_errors"] += batch.skill_error
        if self._end_on_skill_error:
            failed = np.flatnonzero(batch.skill_error & ~(terminated | truncated))
            if failed.size:
                truncated[failed] = True
                fresh = self._session.reset([self._indices[j] for j in failed])
                carried[failed] = prefix_frames(self._session, failed.size)
                if self._meter is not None:
                    self._meter.add(int(carried[failed].sum()))  # that Reset ran the prefix again
                obs = {k: v.copy() for k, v in obs.items()}
                for key in obs:
                    obs[key][failed] = fresh[key]
        done = terminated | truncated
        self._choices[self._rows, acts] += 1  # one decision per env: rows are distinct, no np.add.at needed
        if self._on_episode is not None:
            self._report_episodes(batch, done)
        extra: dict[str, Any] = {key: torch.from_numpy(total.astype(np.float32)) for key, total in sums.items()}
        extra["success"] = torch.from_numpy(batch.success.astype(np.float32))
        if done.any():  # Sample Factory reads the stats only when an episode ended
            extra[CHOICES] = {choice_key(name): torch.from_numpy(self._choices[:, a].astype(np.float32))
                              for a, name in enumerate(self.action_names)}
        for total in sums.values():
            total[done] = 0
        sums["frames"] += carried
        self._choices[done] = 0
        self._last = self._observation(obs)
        return self._last, batch.rewards, terminated, truncated, {"episode_extra_stats": extra}

    def _report_episodes(self, batch: Any, done: np.ndarray) -> None:
        """Each finished episode's frames, achievements unlocked (names), success, return and decisions per action
        (``actions``: name -> times chosen) to ``on_episode``."""
        for j, names in enumerate(batch.unlocked):
            self._unlocked[j].update(names)
        self._returns += batch.rewards
        for j in np.flatnonzero(done):
            assert self._on_episode is not None
            episode = {"frames": int(self._sums["frames"][j]), "achievements": sorted(self._unlocked[j]),
                       "success": bool(batch.success[j]), "return": float(self._returns[j])}
            if batch.end_reasons:
                episode["end_reason"] = batch.end_reasons[j] or "truncated"  # "" only where a skill error ended it
            if batch.stages_done is not None:
                episode["stages_done"] = int(batch.stages_done[j])
            episode["actions"] = {self.action_names[a]: int(n) for a in np.flatnonzero(self._choices[j])
                                  if (n := self._choices[j, a])}
            self._on_episode(episode)
            self._unlocked[j] = set()
            self._returns[j] = 0.0

    def close(self) -> None:
        """Idempotent: Sample Factory may close an env more than once."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close()
        else:
            self._session.close()


class SharedSessions:
    """One session per key (a rollout worker) in this process, shared by its vector envs; the last
    ``release`` closes it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[Any, tuple[ManyEnvs, int]] = {}

    def acquire(self, key: Any, create: Callable[[], ManyEnvs]) -> ManyEnvs:
        with self._lock:
            session, users = self._sessions.get(key, (None, 0))
            if session is None:
                session = create()
            self._sessions[key] = (session, users + 1)
            return session

    def release(self, key: Any) -> None:
        with self._lock:
            session, users = self._sessions[key]
            if users > 1:
                self._sessions[key] = (session, users - 1)
                return
            del self._sessions[key]
        session.close()
