"""The learner's Sample Factory env over a real env server: one session per rollout worker, its splits as
groups of envs stepped with one call each, CHW images, per-worker worlds, stats, a failing skill, a lost server."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from rlgpt.env_client import EnvServerLost
from rlgpt.gym_env import RemoteEnv
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2
from rlgpt.worlds import training_worlds
from services.learner.jobs import write_job_config
from services.learner.sf_env import make_sf_env
from services.learner.vec_env import choice_action

FAILS_WITH_DIAMOND = ("def skill(agent):\n    yield 'noop'\n"
                      "    if agent.inventory.get('diamond', 0) > 0:\n        raise ValueError('a diamond')\n")


def job(tmp_path: Path, target: str, envs_per_worker: int = 4, splits: int = 2, record: bool = False,
        **fields) -> types.SimpleNamespace:
    """Sample Factory's cfg of a job (what the env factory reads of it)."""
    fields = {"task": common_pb2.TaskSpec(name="collect_wood"), **fields}
    config = learner_pb2.RLConfig(name="t", backend="crafter", episode_length=20, seed=4,
                                  envs_per_worker=envs_per_worker, **fields)
    write_job_config(tmp_path, config, {"env_server": target, "record_episodes": record})
    return types.SimpleNamespace(rlgpt_job_dir=str(tmp_path), worker_num_splits=splits)


def slot(worker: int, split: int) -> types.SimpleNamespace:
    """Sample Factory's env_config for the vector env of one split of a rollout worker."""
    return types.SimpleNamespace(worker_index=worker, vector_index=split, env_id=worker * 2 + split)


def sessions_open(env_server) -> int:
    return len(env_server.servicer.sessions)


def test_splits_share_their_workers_session_and_play_its_worlds_in_chw(env_server, tmp_path) -> None:
    env_server.servicer.sessions.close_all()
    cfg = job(tmp_path, env_server.target)
    splits = [make_sf_env("rlgpt", cfg, slot(1, s)) for s in (0, 1)]
    other_worker = make_sf_env("rlgpt", cfg, slot(0, 0))
    assert sessions_open(env_server) == 2  # one per worker, not one per env or split
    seed = training_worlds(4, 1)
    reference = RemoteEnv(env_server.target, task="collect_wood", seed=seed + 2)  # env 2 of worker 1: split 1's first
    try:
        assert splits[0]._session is splits[1]._session and other_worker._session is not splits[0]._session
        assert splits[0]._session.num_envs == 4 and splits[0].num_agents == splits[1].num_agents == 2
        first = [env.reset()[0] for env in splits]
        assert splits[0].observation_space["image"].shape == (3, 64, 64)
        assert all(obs["image"].shape == (2, 3, 64, 64) and obs["image"].flags.c_contiguous for obs in first)
        assert not np.array_equal(first[0]["image"][0], first[1]["image"][0])
        want, _ = reference.reset()
        assert np.array_equal(first[1]["image"][0], want["image"].transpose(2, 0, 1))
        # A step of split 1 moves its own envs only: the same actions on the reference world match.
        obs, rewards, terminated, truncated, _ = splits[1].step(torch.tensor([3, 0]))
        assert rewards.shape == terminated.shape == truncated.shape == (2,)
        want, *_ = reference.step(3)
        assert np.array_equal(obs["image"][0], want["image"].transpose(2, 0, 1))
    finally:
        for env in [*splits, other_worker, splits[0]]:  # a second close is fine
            env.close()
        reference.close()
    assert sessions_open(env_server) == 0  # the worker's last split closed the shared session (and the reference)


def test_frames_and_episode_stats_reach_sample_factory(env_server, tmp_path) -> None:
    env = make_sf_env("rlgpt", job(tmp_path, env_server.target, envs_per_worker=2), slot(0, 0))
    try:
        env.reset()
        outcomes = [env.step(np.zeros(1, np.int64)) for _ in range(20)]
        assert [bool(o[3][0]) for o in outcomes] == [False] * 19 + [True]  # the time limit truncates
        stats = dict(outcomes[-1][4]["episode_extra_stats"])
        # What the policy chose, per action (escaped for TensorBoard), reported when an episode ends.
        choices = stats.pop("choices")
        assert {choice_action(key): float(v[0]) for key, v in choices.items() if v[0]} == {env.action_names[0]: 20.0}
        assert set(map(choice_action, choices)) == set(env.action_names)
        assert all(isinstance(v, torch.Tensor) and v.shape == (1,) for v in stats.values())
        assert stats["frames"][0] == 20.0 and stats["skill_frames"][0] == stats["skill_uses"][0] == 0.0
        assert stats["skill_errors"][0] == 0.0 and stats["success"][0] in (0.0, 1.0)
        # The server reset the env: the next episode's stats start from zero.
        after = env.step(np.zeros(1, np.int64))[4]["episode_extra_stats"]
        assert after["frames"][0] == 1.0 and "choices" not in after  # no episode ended
    finally:
        env.close()


def test_a_failing_skill_ends_the_episode_and_is_counted(env_server, tmp_path) -> None:
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="sf_fails", code=FAILS_WITH_DIAMOND, replace=True))
    task = common_pb2.TaskSpec(name="collect_wood", start_inventory=[common_pb2.ItemCount(item="diamond", count=1)])
    env = make_sf_env("rlgpt", job(tmp_path, env_server.target, envs_per_worker=4, task=task, skills=["sf_fails"],
                                   skill_max_steps=4), slot(0, 0))
    try:
        first, _ = env.reset()
        skill = env.action_space.n - 1
        obs, _, terminated, truncated, info = env.step(np.array([skill, 0]))
        assert list(terminated) == [False, False] and list(truncated) == [True, False]
        stats = info["episode_extra_stats"]
        assert stats["skill_errors"][0] == 1.0 and stats["skill_uses"][0] == 1.0 and stats["skill_uses"][1] == 0.0
        # The failed env starts its next episode (a fresh world); the other goes on.
        assert not np.array_equal(obs["image"][0], first["image"][0])
        assert env.step(np.array([0, 0]))[4]["episode_extra_stats"]["frames"][0] == 1.0
    finally:
        env.close()


def test_a_lost_env_server_writes_error_json_and_ends_the_job(env_server, tmp_path) -> None:
    env = make_sf_env("rlgpt", job(tmp_path, env_server.target, envs_per_worker=2), slot(0, 0))
    try:
        env.reset()
        env_server.stub.CloseSession(env_pb2.CloseSessionRequest(session_id=env._session.id))
        with pytest.raises(EnvServerLost, match="NOT_FOUND"):
            env.step(np.zeros(1, np.int64))
        message = json.loads((tmp_path / "error.json").read_text())["message"]
        assert message.startswith(f"env server at {env_server.target} failed: NOT_FOUND: ")
        assert message.endswith(" (the training job cannot continue; its checkpoints are kept)")
    finally:
        env.close()


def test_one_split_steps_all_of_its_workers_envs_in_one_call(env_server, tmp_path) -> None:
    env = make_sf_env("rlgpt", job(tmp_path, env_server.target, envs_per_worker=3, splits=1), slot(0, 0))
    try:
        assert env.num_agents == 3 and env._session.num_envs == 3
        obs, rewards, *_ = env.step(np.zeros(3, np.int64))
        assert obs["image"].shape == (3, 3, 64, 64) and rewards.shape == (3,)
    finally:
        env.close()


def test_a_job_that_records_episodes_logs_each_with_its_achievements(env_server, tmp_path) -> None:
    task = common_pb2.TaskSpec(name="collect_wood", start_inventory=[common_pb2.ItemCount(item="wood", count=1)])
    env = make_sf_env("rlgpt", job(tmp_path, env_server.target, envs_per_worker=2, record=True, task=task),
                      slot(1, 0))
    place_table = env.action_names.index("place_table")
    try:
        env.reset()
        for step in range(20):  # episode_length 20: one episode per env
            env.step(np.array([place_table if step == 0 else 0]))
        lines = (tmp_path / "episodes" / "worker1-0.jsonl").read_text().splitlines()
        assert len(lines) == 1
        episode = json.loads(lines[0])
        assert episode["frames"] == 20 and episode["success"] is False and episode["time"] > 0
        assert isinstance(episode["achievements"], list) and isinstance(episode["return"], float)
        assert episode["end_reason"] == "time_limit" and episode["stages_done"] == 0  # the job has no stages
        assert episode["actions"] == {"place_table": 1, env.action_names[0]: 19}  # what the policy chose
    finally:
        env.close()
    (tmp_path / "b").mkdir()
    untracked = make_sf_env("rlgpt", job(tmp_path / "b", env_server.target, envs_per_worker=2), slot(0, 0))
    untracked.close()
    assert not (tmp_path / "b" / "episodes").exists()  # only when the job asks for it


