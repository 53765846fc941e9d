"""The vector env's frame count behind a chain prefix: the frames the env server's prefix ran before an episode's
first observation (at the session's creation, an autoreset, a Reset after a failing skill) are that episode's."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlgpt.env_client import RemoteSession
from rlgpt.tensors import to_tensor
from rlgpt.v1 import common_pb2, env_pb2
from services.learner.vec_env import SessionVecEnv, prefix_frames


def observations(rows: int, prefix: list[int] | None = None) -> env_pb2.Observations:
    return env_pb2.Observations(image=to_tensor(np.zeros((rows, 4, 4, 3), np.uint8)),
                                vector=to_tensor(np.zeros((rows, 2), np.float32)), prefix_frames=prefix or [])


class Stub:
    """The env server's answers a session of 2 envs gets: ``steps`` in turn, and a Reset whose prefix ran 3 frames."""

    def __init__(self, steps: list[env_pb2.StepResponse]):
        self.steps = steps

    def CreateSession(self, request: Any, timeout: float) -> env_pb2.CreateSessionResponse:
        fields = [env_pb2.ObservationField(name="image", shape=[4, 4, 3]),
                  env_pb2.ObservationField(name="vector", shape=[2], scale=10)]
        return env_pb2.CreateSessionResponse(session_id="s", actions=["noop", "skill:chop"], num_envs=2,
                                             observation=fields, observations=observations(2, [5, 7]))

    def Reset(self, request: env_pb2.ResetRequest, timeout: float) -> env_pb2.ResetResponse:
        return env_pb2.ResetResponse(observations=observations(len(request.env_indices), [3]))

    def Step(self, request: env_pb2.StepRequest, timeout: float) -> env_pb2.StepResponse:
        return self.steps.pop(0)

    def CloseSession(self, request: Any, timeout: float) -> None:
        return None


def step(frames: list[int], prefix: list[int], terminated=(False, False), skill_error=(False, False)
         ) -> env_pb2.StepResponse:
    infos = [env_pb2.StepInfo(skill_error=common_pb2.SkillError(message="x")) if bad else env_pb2.StepInfo()
             for bad in skill_error]
    return env_pb2.StepResponse(observations=observations(2, prefix), rewards=[0.0, 0.0], terminated=list(terminated),
                                truncated=[False, False], frames=frames, infos=infos)


def test_an_episodes_frames_hold_the_prefix_that_ran_before_it() -> None:
    stub = Stub([step([1, 1], []),
                 step([1 + 6, 2], [6, 0], terminated=(True, False)),  # env 0's autoreset ran 6 prefix frames
                 step([1, 1], [], skill_error=(False, True))])  # env 1's skill fails: a Reset, 3 prefix frames
    session = RemoteSession(stub, env_pb2.CreateSessionRequest())
    assert session.first_prefix_frames.tolist() == [5, 7]
    episodes: list[dict] = []
    env = SessionVecEnv(session, range(2), on_episode=episodes.append)
    env.reset()
    env.step(np.array([0, 1]))
    _, _, _, _, info = env.step(np.array([0, 1]))
    assert info["episode_extra_stats"]["frames"][0] == 5 + 1 + 1  # its own prefix, not the next episode's
    assert info["episode_extra_stats"]["skill_frames"][1] == 1 + 2
    env.step(np.array([0, 1]))
    assert [e["frames"] for e in episodes] == [7, 7 + 1 + 2 + 1]
    assert env._sums["frames"].tolist() == [6 + 1, 3]  # the next episodes start with their prefix's frames


def test_a_session_that_tells_no_prefix_counts_none() -> None:
    class InProcess:  # the benchmark's in-process session knows no prefix
        pass

    assert prefix_frames(InProcess(), 3).tolist() == [0, 0, 0]
    session = RemoteSession(Stub([step([1, 1], [])]), env_pb2.CreateSessionRequest())
    session.step_envs([0, 0])
    assert prefix_frames(session, 2).tolist() == [0, 0] and prefix_frames(session, 2, first=True).tolist() == [5, 7]
