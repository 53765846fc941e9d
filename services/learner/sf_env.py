"""A ``gymnasium.Env`` over one env-server session, registered with Sample Factory.

Observations are ``{"image": uint8 CHW, "vector": float32}`` (Sample Factory's conv encoders want
CHW); actions are Discrete(primitives + skills). A skill action may consume up to K frames: the
frames are counted per episode and reported through ``info["episode_extra_stats"]`` so the
learner's frame budget and FPS count frames, not decisions.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import grpc
import gymnasium as gym
import numpy as np
from google.protobuf import json_format

from rlgpt.grpc_client import create_channel
from rlgpt.v1 import env_pb2, env_pb2_grpc, learner_pb2

log = logging.getLogger(__name__)
ENV_NAME = "rlgpt"
# Any of these ends the job at once (error.json), instead of leaving Sample Factory waiting on a dead worker.
_FATAL_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.INVALID_ARGUMENT}


class EnvServerLost(RuntimeError):
    """The env server stopped answering; the job cannot go on."""


def load_job_config(job_dir: Path) -> tuple[learner_pb2.RLConfig, dict[str, Any]]:
    doc = json.loads((job_dir / "config.json").read_text())
    return json_format.ParseDict(doc["config"], learner_pb2.RLConfig()), doc


def session_request(config: learner_pb2.RLConfig, seed: int, *, num_envs: int = 1, client: str = "",
                    record: bool = False, autoreset: bool = False) -> env_pb2.CreateSessionRequest:
    return env_pb2.CreateSessionRequest(
        backend=config.backend, task=config.task, seed=seed, num_envs=num_envs,
        reward_terms=list(config.reward_terms), episode_length=config.episode_length,
        primitive_actions=list(config.primitive_actions), skills=list(config.skills),
        skill_max_steps=config.skill_max_steps, autoreset=autoreset, client=client,
        record_trajectories=record)


class EnvServerEnv(gym.Env):
    """One env of one session; Sample Factory creates one per (worker, env slot)."""

    metadata = {"render_modes": []}

    def __init__(self, config: learner_pb2.RLConfig, target: str, seed: int, job_dir: Path | None = None):
        self._config = config
        self._target = target
        self._job_dir = job_dir
        self._channel = create_channel(target, default_timeout=120)
        self._stub = env_pb2_grpc.EnvServiceStub(self._channel)
        response = self._call(self._stub.CreateSession, session_request(config, seed, client=f"learner:{job_dir}"))
        self._session_id = response.session_id
        fields = {f.name: f for f in response.observation}
        height, width, channels = fields["image"].shape
        self.action_names = list(response.actions)
        self.skill_actions = {i for i, name in enumerate(self.action_names) if name.startswith("skill:")}
        self.action_space = gym.spaces.Discrete(len(self.action_names))
        self.observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 255, (channels, height, width), np.uint8),
            "vector": gym.spaces.Box(-1e6, 1e6, tuple(fields["vector"].shape), np.float32),
        })
        self._first = self._convert(response.observations)
        self._reset_stats()

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request)
        except grpc.RpcError as exc:
            if exc.code() in _FATAL_CODES:
                message = (f"env server at {self._target} failed: {exc.code().name}: {exc.details()} "
                           "(the training job cannot continue; its checkpoints are kept)")
                if self._job_dir is not None:
                    (self._job_dir / "error.json").write_text(json.dumps({"message": message}))
                raise EnvServerLost(message) from None
            raise

    @staticmethod
    def _convert(obs: env_pb2.Observations) -> dict[str, np.ndarray]:
        from rlgpt.tensors import from_tensor

        image = from_tensor(obs.image)[0]
        return {"image": np.ascontiguousarray(image.transpose(2, 0, 1)), "vector": from_tensor(obs.vector)[0].copy()}

    def _reset_stats(self) -> None:
        self._frames = 0
        self._skill_frames = 0
        self._skill_uses = 0
        self._skill_errors = 0
        self._achievements = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self._reset_stats()
        if self._first is not None:  # a new session starts reset; skip one round trip
            obs, self._first = self._first, None
            return obs, {}
        response = self._call(self._stub.Reset, env_pb2.ResetRequest(session_id=self._session_id))
        return self._convert(response.observations), {}

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        action = int(action)
        response = self._call(self._stub.Step, env_pb2.StepRequest(session_id=self._session_id, actions=[action]))
        frames = response.frames[0]
        info_pb = response.infos[0]
        self._frames += frames
        self._achievements += len(info_pb.achievements)
        if action in self.skill_actions:
            self._skill_uses += 1
            self._skill_frames += frames
        terminated, truncated = bool(response.terminated[0]), bool(response.truncated[0])
        if info_pb.HasField("skill_error"):
            # A failing skill ends the episode: it is counted and training goes on.
            self._skill_errors += 1
            truncated = truncated or not terminated
        info: dict[str, Any] = {"frames": frames}
        if terminated or truncated:
            info["episode_extra_stats"] = {
                "success": float(info_pb.success), "frames": float(self._frames),
                "skill_frames": float(self._skill_frames), "skill_uses": float(self._skill_uses),
                "skill_errors": float(self._skill_errors), "achievements": float(self._achievements),
            }
        return self._convert(response.observations), float(response.rewards[0]), terminated, truncated, info

    def close(self) -> None:
        try:
            self._stub.CloseSession(env_pb2.CloseSessionRequest(session_id=self._session_id), timeout=5)
        except grpc.RpcError:
            pass  # the server may be gone; its reaper closes idle sessions anyway
        self._channel.close()


def make_sf_env(full_env_name: str, cfg: Any = None, env_config: Any = None, render_mode: str | None = None
                ) -> EnvServerEnv:
    """Sample Factory's env factory: reads the job's config.json; one seed per env slot."""
    job_dir = Path(cfg.rlgpt_job_dir)
    config, doc = load_job_config(job_dir)
    env_id = int(env_config.env_id) if env_config is not None else 0
    seed = int(config.seed) + 1_000_003 * (env_id + 1)  # distinct, reproducible worlds per env slot
    return EnvServerEnv(config, doc["env_server"], seed, job_dir)
