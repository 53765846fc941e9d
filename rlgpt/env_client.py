"""Client side of the env server: a typed session handle and a ``gymnasium.Env`` over one session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rlgpt.grpc_client import create_channel
from rlgpt.tensors import from_tensor
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc


class RemoteSession:
    """One env-server session of N envs: batched reset/step returning NumPy arrays."""

    def __init__(self, stub: env_pb2_grpc.EnvServiceStub, request: env_pb2.CreateSessionRequest,
                 timeout: float = 60.0):
        self._stub = stub
        self._timeout = timeout
        response = stub.CreateSession(request, timeout=timeout)
        self.id = response.session_id
        self.actions = list(response.actions)
        self.num_envs = response.num_envs
        self.fields = {f.name: f for f in response.observation}
        self.first_observations = self._obs(response.observations)

    @staticmethod
    def _obs(obs: env_pb2.Observations) -> dict[str, np.ndarray]:
        return {"image": from_tensor(obs.image), "vector": from_tensor(obs.vector)}

    def reset(self, env_indices: Sequence[int] = (), seed: int = 0) -> dict[str, np.ndarray]:
        response = self._stub.Reset(env_pb2.ResetRequest(session_id=self.id, env_indices=list(env_indices),
                                                         seed=seed), timeout=self._timeout)
        return self._obs(response.observations)

    def step(self, actions: Sequence[int]) -> tuple[dict[str, np.ndarray], env_pb2.StepResponse]:
        response = self._stub.Step(env_pb2.StepRequest(session_id=self.id, actions=list(actions)),
                                   timeout=self._timeout)
        return self._obs(response.observations), response

    def close(self) -> None:
        self._stub.CloseSession(env_pb2.CloseSessionRequest(session_id=self.id), timeout=self._timeout)


def list_all_skills(stub: env_pb2_grpc.EnvServiceStub, backend: str = "", *, include_code: bool = False,
                    timeout: float = 30.0) -> env_pb2.ListSkillsResponse:
    """Every registered skill (of ``backend``), following ListSkills' pages, as one response."""
    every = env_pb2.ListSkillsResponse()
    token = ""
    while True:
        page = stub.ListSkills(env_pb2.ListSkillsRequest(backend=backend, page_token=token,
                                                         include_code=include_code), timeout=timeout)
        every.skills.extend(page.skills)
        token = page.next_page_token
        if not token:
            return every


class RemoteEnv(gym.Env[dict[str, np.ndarray], int]):
    """A single-env session as a gymnasium env: Dict(image HWC uint8, vector float32), Discrete actions.

    Frames consumed by a skill action are reported in ``info["frames"]`` so sample counts stay honest.
    """

    metadata = {"render_modes": []}

    def __init__(self, target: str, *, task: str = "", backend: str = "crafter", seed: int = 0,
                 skills: Sequence[str] = (), primitive_actions: Sequence[str] = (), skill_max_steps: int = 0,
                 episode_length: int = 0, reward_terms: Sequence[common_pb2.RewardTerm] = (),
                 start_inventory: dict[str, int] | None = None, timeout: float = 60.0):
        self._channel = create_channel(target, default_timeout=timeout)
        self._stub = env_pb2_grpc.EnvServiceStub(self._channel)
        task_spec = common_pb2.TaskSpec(name=task, start_inventory=[
            common_pb2.ItemCount(item=k, count=v) for k, v in (start_inventory or {}).items()])
        # autoreset off: gymnasium's contract is that the caller resets after an episode ends.
        self._session = RemoteSession(self._stub, env_pb2.CreateSessionRequest(
            backend=backend, task=task_spec, seed=seed, num_envs=1, skills=list(skills),
            primitive_actions=list(primitive_actions), skill_max_steps=skill_max_steps,
            episode_length=episode_length, reward_terms=list(reward_terms), autoreset=False,
            client="gymnasium"), timeout=timeout)
        image, vector = self._session.fields["image"], self._session.fields["vector"]
        self.action_names = self._session.actions
        self.action_space = gym.spaces.Discrete(len(self.action_names))
        self.observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 255, tuple(image.shape), np.uint8),
            # Finite bounds: positions and counts are large but never infinite.
            "vector": gym.spaces.Box(-1e6, 1e6, tuple(vector.shape), np.float32),
        })
        self._base_seed = seed

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        obs = self._session.reset(seed=seed if seed else 0)
        return {k: v[0] for k, v in obs.items()}, {}

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        obs, response = self._session.step([int(action)])
        info_pb = response.infos[0]
        info: dict[str, Any] = {
            "frames": response.frames[0], "success": info_pb.success, "achievements": list(info_pb.achievements),
            "episode_steps": info_pb.episode_steps, "skill_finished": info_pb.skill_finished,
        }
        if info_pb.HasField("skill_error"):
            info["skill_error"] = info_pb.skill_error
        return ({k: v[0] for k, v in obs.items()}, float(response.rewards[0]), bool(response.terminated[0]),
                bool(response.truncated[0]), info)

    def close(self) -> None:
        try:
            self._session.close()
        finally:
            self._channel.close()
