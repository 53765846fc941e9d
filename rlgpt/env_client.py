"""Client side of the env server: ``RemoteSession``, one session of N envs over gRPC, the one path every caller
steps a session through.

The learner trains through ``SessionVecEnv`` (services/learner/vec_env.py) over a session's batched
``step_envs``; its evaluations (a policy, a kept plan alone, a chain) step ``RemoteSession.step`` in
``services/learner/evaluate.step_first_episodes``; scripts use the gymnasium view of one env, ``RemoteEnv``
(rlgpt/gym_env.py), which steps ``RemoteSession`` too. ``ManyEnvs`` is what the vector env steps: a
``RemoteSession``, or the benchmark's in-process session.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import grpc
import numpy as np

from rlgpt.grpc_client import create_channel
from rlgpt.step_stream import StepStream
from rlgpt.tensors import from_tensor
from rlgpt.v1 import env_pb2, env_pb2_grpc

log = logging.getLogger(__name__)
Observation = dict[str, np.ndarray]

# Codes after which a session cannot go on (server gone, session expired, request refused for good).
FATAL_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.DEADLINE_EXCEEDED,
                         grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION,
                         grpc.StatusCode.INVALID_ARGUMENT})


class EnvServerLost(RuntimeError):
    """The env server stopped answering a session; the caller cannot go on with it."""


@dataclasses.dataclass(frozen=True)
class EnvStep:
    """One env's result of one step, whichever way it was carried."""

    observation: Observation
    """``image`` (HWC uint8, as served) and ``vector`` (float32) of this env."""
    reward: float
    terminated: bool
    truncated: bool
    frames: int
    """Frames the step consumed: 1 for a primitive, up to K for a skill action."""
    success: bool
    achievements: list[str]
    """Achievements unlocked during this step."""
    episode_steps: int
    skill_finished: bool
    skill_error: Any = None
    """What a failing skill raised (``common_pb2.SkillError`` from the server), else None."""


@dataclasses.dataclass(frozen=True)
class EnvBatch:
    """The results of one step of several envs of a session, one row per stepped env, in their order."""

    observation: Observation
    """``image`` [n, H, W, C] uint8 (as served) and ``vector`` [n, D] float32."""
    rewards: np.ndarray
    """float32 [n]."""
    terminated: np.ndarray
    """bool [n]."""
    truncated: np.ndarray
    """bool [n]."""
    frames: np.ndarray
    """int [n]: frames each env consumed (1 for a primitive, up to K for a skill action)."""
    success: np.ndarray
    """bool [n]: the task's success holds in the episode (the one that just ended, for an env that was reset)."""
    achievements: np.ndarray
    """int [n]: achievements unlocked during this step."""
    skill_error: np.ndarray
    """bool [n]: the env's skill action failed."""
    unlocked: list[list[str]] = dataclasses.field(default_factory=list)
    """Per env, the achievements unlocked during this step (their names)."""
    stages_done: np.ndarray | None = None
    """int [n]: stages done so far in the episode (the ended one's for an env that was reset); None: not read."""
    end_reasons: list[str] = dataclasses.field(default_factory=list)
    """Per env, why its episode ended on this step ("" when it did not); empty: not read."""


def env_batch(obs: Observation, response: env_pb2.StepResponse) -> EnvBatch:
    """A step's results as arrays: ``obs`` (its observations, as read) and the ``response``."""
    infos = response.infos
    return EnvBatch(
        observation=obs, rewards=np.asarray(response.rewards, np.float32),
        terminated=np.asarray(response.terminated, bool), truncated=np.asarray(response.truncated, bool),
        frames=np.asarray(response.frames, np.int64), success=np.array([i.success for i in infos], bool),
        achievements=np.array([len(i.achievements) for i in infos], np.int64),
        skill_error=np.array([i.HasField("skill_error") for i in infos], bool),
        unlocked=[list(i.achievements) for i in infos],
        stages_done=np.array([sum(i.stages_done) for i in infos], np.int64),
        end_reasons=[i.end_reason for i in infos])


class ManyEnvs(Protocol):
    """A session of several envs stepped together (or in groups), as ``SessionVecEnv`` steps it."""

    actions: list[str]
    num_envs: int
    image_shape: tuple[int, ...]
    vector_shape: tuple[int, ...]
    vector_scale: float
    """What a network divides the vector by (the env server's ObservationField.scale; 0: not scaled)."""
    first_observations: Observation
    """The observations the session was created with (a new session starts reset), all envs."""

    def reset(self, env_indices: Sequence[int] = (), seed: int = 0) -> Observation: ...

    def step_envs(self, actions: Sequence[int], env_indices: Sequence[int] = ()) -> EnvBatch: ...

    def close(self) -> None: ...


class RemoteSession:
    """One env-server session of N envs: batched reset/step returning NumPy arrays.

    With ``on_lost``, a call failing with one of ``FATAL_CODES`` calls ``on_lost(message)`` (the message names
    the server and the status) and raises ``EnvServerLost``; without it the ``grpc.RpcError`` propagates.
    ``timeout`` bounds every call; the channel retries calls that never reached the server (UNAVAILABLE).
    With ``streaming``, steps go over one ``StreamSteps`` call (``StepStream``) instead of a unary ``Step`` each.
    """

    def __init__(self, stub: env_pb2_grpc.EnvServiceStub, request: env_pb2.CreateSessionRequest,
                 timeout: float = 60.0, *, target: str = "", on_lost: Callable[[str], None] | None = None,
                 channel: grpc.Channel | None = None, streaming: bool = False):
        self._stub = stub
        self._streaming = streaming
        self._stream: StepStream | None = None
        self._timeout = timeout
        self._target = target
        self._on_lost = on_lost
        self._channel = channel
        self._closed = False
        try:
            response = self._call(stub.CreateSession, request)
        except BaseException:
            self._close_channel()
            raise
        self.id = response.session_id
        self.actions = list(response.actions)
        self.num_envs = response.num_envs
        self.fields = {f.name: f for f in response.observation}
        self.image_shape = tuple(self.fields["image"].shape)
        self.vector_shape = tuple(self.fields["vector"].shape)
        self.vector_scale = self.fields["vector"].scale
        self.prefix_frames = np.zeros(0, np.int64)
        """Per row of the observations last returned (created, reset or stepped): the env frames the session's
        chain prefix (CreateSessionRequest.prefix) took before it; 0 where a row is no episode's first."""
        self.first_observations = self._obs(response.observations)
        self.first_prefix_frames = self.prefix_frames
        """The prefix frames before the observations the session was created with, one per env."""

    @classmethod
    def connect(cls, target: str, request: env_pb2.CreateSessionRequest, *, timeout: float = 60.0,
                on_lost: Callable[[str], None] | None = None, streaming: bool = False) -> RemoteSession:
        """A session on its own channel to ``target``; ``close`` closes both."""
        channel = create_channel(target, default_timeout=timeout)
        return cls(env_pb2_grpc.EnvServiceStub(channel), request, timeout, target=target, on_lost=on_lost,
                   channel=channel, streaming=streaming)

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            if self._stream is not None and method == self._stream.step:
                self._stream.close()
                self._stream = None  # a failed stream is over; the next step opens a new one
            if self._on_lost is None or exc.code() not in FATAL_CODES:
                raise
            message = f"env server at {self._target} failed: {exc.code().name}: {exc.details()}"
            self._on_lost(message)
            raise EnvServerLost(message) from None

    def _obs(self, obs: env_pb2.Observations) -> Observation:
        observation = {"image": from_tensor(obs.image), "vector": from_tensor(obs.vector)}
        rows = len(observation["image"])
        self.prefix_frames = np.asarray(obs.prefix_frames, np.int64) if obs.prefix_frames else np.zeros(rows, np.int64)
        return observation

    def reset(self, env_indices: Sequence[int] = (), seed: int = 0) -> Observation:
        response = self._call(self._stub.Reset, env_pb2.ResetRequest(session_id=self.id, env_indices=list(env_indices),
                                                                     seed=seed))
        return self._obs(response.observations)

    def step(self, actions: Sequence[int], env_indices: Sequence[int] = ()
             ) -> tuple[Observation, env_pb2.StepResponse]:
        """Steps every env, or the envs in ``env_indices`` (``actions`` in their order)."""
        if self._streaming and self._stream is None:
            self._stream = StepStream(self._stub)
        method = self._stream.step if self._stream is not None else self._stub.Step
        response = self._call(method, env_pb2.StepRequest(session_id=self.id, actions=list(actions),
                                                          env_indices=list(env_indices)))
        return self._obs(response.observations), response

    def step_envs(self, actions: Sequence[int], env_indices: Sequence[int] = ()) -> EnvBatch:
        return env_batch(*self.step(actions, env_indices))

    # --- OneEnv (rlgpt/gym_env.py): env 0 ------------------------------------------------------------
    def initial_observation(self) -> Observation:
        return {k: v[0] for k, v in self.first_observations.items()}

    def reset_env(self, seed: int = 0) -> Observation:
        return {k: v[0] for k, v in self.reset(seed=seed).items()}

    def step_env(self, action: int) -> EnvStep:
        obs, response = self.step([action])
        info = response.infos[0]
        return EnvStep(
            observation={k: v[0] for k, v in obs.items()}, reward=float(response.rewards[0]),
            terminated=bool(response.terminated[0]), truncated=bool(response.truncated[0]),
            frames=response.frames[0], success=info.success, achievements=list(info.achievements),
            episode_steps=info.episode_steps, skill_finished=info.skill_finished,
            skill_error=info.skill_error if info.HasField("skill_error") else None)

    def close(self, timeout: float = 5.0) -> None:
        """Closes the session; a server that is already gone is fine (its reaper closes idle sessions). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        try:
            self._stub.CloseSession(env_pb2.CloseSessionRequest(session_id=self.id), timeout=timeout)
        except grpc.RpcError as exc:
            log.debug("closing session %s: %s", self.id, exc.code())
        finally:
            self._close_channel()

    def _close_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None


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
