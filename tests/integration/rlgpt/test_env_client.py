"""The env client against a real env server on loopback: sessions, the gymnasium view, stats, lost servers."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from rlgpt.env_client import EnvServerLost, RemoteSession
from rlgpt.gym_env import RemoteEnv, SessionEnv
from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.skills.reference import COLLECT_WOOD

# Fails at once where the task gives a diamond; RegisterSkill's test worlds give none, so it is accepted.
FAILS_WITH_DIAMOND = ("def skill(agent):\n    yield 'noop'\n"
                      "    if agent.inventory.get('diamond', 0) > 0:\n        raise ValueError('a diamond')\n")


def request(seed: int = 3, **fields) -> env_pb2.CreateSessionRequest:
    fields = {"backend": "crafter", "task": common_pb2.TaskSpec(name="collect_wood"), "num_envs": 1,
              "client": "test", **fields}
    return env_pb2.CreateSessionRequest(seed=seed, **fields)


@pytest.fixture(scope="module")
def skills(env_server) -> None:
    for name, code in (("client_wood", COLLECT_WOOD), ("client_fails", FAILS_WITH_DIAMOND)):
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))


def test_remote_session_batches_and_closes_its_own_channel(env_server) -> None:
    session = RemoteSession.connect(env_server.target, request(num_envs=2))
    try:
        assert session.num_envs == 2 and session.image_shape == (64, 64, 3) and len(session.vector_shape) == 1
        assert session.first_observations["image"].shape == (2, 64, 64, 3)
        obs, response = session.step([0, 0])
        assert obs["vector"].shape == (2, *session.vector_shape) and list(response.frames) == [1, 1]
        assert session.reset(env_indices=[1])["image"].shape == (1, 64, 64, 3)  # the envs it reset
    finally:
        session.close()
    session.close()  # closing twice (the session and the channel gone) is fine


def test_first_reset_is_the_session_s_first_world_and_a_seed_replays_it(env_server) -> None:
    session = RemoteSession.connect(env_server.target, request(seed=11))
    first = session.initial_observation()["image"].copy()
    session.close()
    env = RemoteEnv(env_server.target, task="collect_wood", seed=11)
    try:
        obs, _ = env.reset()
        assert obs["image"].shape == (64, 64, 3) and np.array_equal(obs["image"], first)
        env.step(0)
        second, _ = env.reset()
        assert not np.array_equal(second["image"], first)  # the next world of the session
        replay, _ = env.reset(seed=11)
        assert np.array_equal(replay["image"], first)
    finally:
        env.close()


def test_channels_first_and_ignored_reset_seeds(env_server) -> None:
    env = SessionEnv(RemoteSession.connect(env_server.target, request(seed=5)), channels_first=True, reseed=False)
    reference = RemoteEnv(env_server.target, task="collect_wood", seed=5)
    try:
        assert env.observation_space["image"].shape == (3, 64, 64)
        obs, _ = env.reset(seed=123)  # Sample Factory passes env indices: the session's own worlds are kept
        assert obs["image"].flags.c_contiguous and env.observation_space.contains(obs)
        want, _ = reference.reset()
        assert np.array_equal(obs["image"], want["image"].transpose(2, 0, 1))
        obs, _ = env.reset(seed=7)
        reference.step(0)
        want, _ = reference.reset()
        assert np.array_equal(obs["image"], want["image"].transpose(2, 0, 1))
    finally:
        env.close()
        reference.close()


def test_episode_stats_count_frames_skill_frames_and_uses(env_server, skills) -> None:
    env = RemoteEnv(env_server.target, task="collect_wood", seed=1, skills=["client_wood"], skill_max_steps=4,
                    episode_length=12)
    try:
        env.reset()
        assert env.action_names[-1] == "skill:client_wood" and env.skill_actions == {env.action_space.n - 1}
        frames = skill_frames = uses = achievements = 0
        done, info = False, {}
        for step in range(12):
            action = env.action_space.n - 1 if step % 2 else 0
            _, _, terminated, truncated, info = env.step(action)
            frames += info["frames"]
            achievements += len(info["achievements"])
            if action:
                uses += 1
                skill_frames += info["frames"]
                assert 1 <= info["frames"] <= 4
            else:
                assert info["frames"] == 1
            done = terminated or truncated
            if done:
                break
            assert "episode_extra_stats" not in info
        assert done and frames == 12 and info["episode_steps"] == 12
        assert info["episode_extra_stats"] == {
            "success": float(info["success"]), "frames": 12.0, "skill_frames": float(skill_frames),
            "skill_uses": float(uses), "skill_errors": 0.0, "achievements": float(achievements)}
        env.reset()
        _, _, _, _, info = env.step(0)
        assert info["frames"] == 1  # stats start again with the episode
    finally:
        env.close()


@pytest.mark.parametrize("end_on_skill_error", [False, True])
def test_a_failing_skill_is_counted_and_ends_the_episode_when_asked(env_server, skills, end_on_skill_error) -> None:
    session = RemoteSession.connect(env_server.target, request(
        task=common_pb2.TaskSpec(name="collect_wood", start_inventory=[common_pb2.ItemCount(item="diamond", count=1)]),
        skills=["client_fails"], skill_max_steps=4))
    env = SessionEnv(session, end_on_skill_error=end_on_skill_error)
    try:
        env.reset()
        _, _, terminated, truncated, info = env.step(env.action_space.n - 1)
        assert info["skill_error"].type == "ValueError" and info["skill_error"].line == 4
        assert not terminated and truncated == end_on_skill_error
        if end_on_skill_error:
            assert info["episode_extra_stats"]["skill_errors"] == 1.0
            assert info["episode_extra_stats"]["skill_uses"] == 1.0
        else:
            assert "episode_extra_stats" not in info
    finally:
        env.close()


def test_a_lost_session_raises_env_server_lost_only_when_asked(env_server) -> None:
    lost: list[str] = []
    watched = SessionEnv(RemoteSession.connect(env_server.target, request(), on_lost=lost.append))
    plain = SessionEnv(RemoteSession.connect(env_server.target, request()))
    try:
        for env in (watched, plain):
            env.reset()
            env_server.stub.CloseSession(env_pb2.CloseSessionRequest(session_id=env._session.id))
        with pytest.raises(EnvServerLost, match=f"env server at {env_server.target} failed: NOT_FOUND"):
            watched.step(0)
        assert len(lost) == 1 and lost[0].startswith(f"env server at {env_server.target} failed: NOT_FOUND: ")
        with pytest.raises(grpc.RpcError) as raised:
            plain.step(0)
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        watched.close()  # the session is gone already: closing is still fine
        plain.close()


def test_a_refused_session_closes_its_channel_and_reports_through_on_lost(env_server) -> None:
    lost: list[str] = []
    with pytest.raises(EnvServerLost, match="INVALID_ARGUMENT"):
        RemoteSession.connect(env_server.target, request(num_envs=0), on_lost=lost.append)
    assert len(lost) == 1
    with pytest.raises(grpc.RpcError) as raised:
        RemoteSession.connect("127.0.0.1:1", request(), timeout=2)
    assert raised.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
