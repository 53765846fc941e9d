"""The learner's Sample Factory env over a real env server: CHW images, per-slot worlds, stats, a lost server."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest

from rlgpt.env_client import EnvServerLost, RemoteEnv
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2
from services.learner.jobs import write_job_config
from services.learner.sf_env import make_sf_env, slot_seed

FAILS_WITH_DIAMOND = ("def skill(agent):\n    yield 'noop'\n"
                      "    if agent.inventory.get('diamond', 0) > 0:\n        raise ValueError('a diamond')\n")


def job(tmp_path: Path, target: str, **fields) -> types.SimpleNamespace:
    fields = {"task": common_pb2.TaskSpec(name="collect_wood"), **fields}
    config = learner_pb2.RLConfig(name="t", backend="crafter", episode_length=20, seed=4, **fields)
    write_job_config(tmp_path, config, {"env_server": target})
    return types.SimpleNamespace(rlgpt_job_dir=str(tmp_path))


def slot(env_id: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(env_id=env_id)


def test_slots_play_their_own_worlds_in_chw_whatever_seed_sample_factory_passes(env_server, tmp_path) -> None:
    cfg = job(tmp_path, env_server.target)
    config = learner_pb2.RLConfig(seed=4)
    assert slot_seed(config, slot(0)) == 4 + 1_000_003 and slot_seed(config, slot(2)) == 4 + 3 * 1_000_003
    assert slot_seed(config, None) == slot_seed(config, slot(0))
    envs = [make_sf_env("rlgpt", cfg, slot(i)) for i in (0, 1)]
    reference = RemoteEnv(env_server.target, task="collect_wood", seed=slot_seed(config, slot(1)))
    try:
        first = [env.reset(seed=i)[0] for i, env in enumerate(envs)]
        assert envs[0].observation_space["image"].shape == (3, 64, 64)
        assert all(obs["image"].shape == (3, 64, 64) and obs["image"].flags.c_contiguous for obs in first)
        assert not np.array_equal(first[0]["image"], first[1]["image"])
        want, _ = reference.reset()
        assert np.array_equal(first[1]["image"], want["image"].transpose(2, 0, 1))
    finally:
        for env in envs:
            env.close()
        reference.close()


def test_frames_and_episode_stats_reach_sample_factory(env_server, tmp_path) -> None:
    env = make_sf_env("rlgpt", job(tmp_path, env_server.target), slot(0))
    try:
        env.reset()
        infos = [env.step(0)[4] for _ in range(20)]
        assert [info["frames"] for info in infos] == [1] * 20
        assert all("episode_extra_stats" not in info for info in infos[:-1])
        stats = infos[-1]["episode_extra_stats"]
        assert stats["frames"] == 20.0 and stats["skill_frames"] == stats["skill_uses"] == stats["skill_errors"] == 0.0
        assert stats["achievements"] == float(sum(len(info["achievements"]) for info in infos))
    finally:
        env.close()


def test_a_failing_skill_ends_the_episode_and_is_counted(env_server, tmp_path) -> None:
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="sf_fails", code=FAILS_WITH_DIAMOND, replace=True))
    task = common_pb2.TaskSpec(name="collect_wood", start_inventory=[common_pb2.ItemCount(item="diamond", count=1)])
    env = make_sf_env("rlgpt", job(tmp_path, env_server.target, task=task, skills=["sf_fails"], skill_max_steps=4),
                      slot(0))
    try:
        env.reset()
        _, _, terminated, truncated, info = env.step(env.action_space.n - 1)
        assert not terminated and truncated
        assert info["episode_extra_stats"]["skill_errors"] == 1.0 and info["episode_extra_stats"]["skill_uses"] == 1.0
    finally:
        env.close()


def test_a_lost_env_server_writes_error_json_and_ends_the_job(env_server, tmp_path) -> None:
    env = make_sf_env("rlgpt", job(tmp_path, env_server.target), slot(0))
    try:
        env.reset()
        env_server.stub.CloseSession(env_pb2.CloseSessionRequest(session_id=env._session.id))
        with pytest.raises(EnvServerLost, match="NOT_FOUND"):
            env.step(0)
        message = json.loads((tmp_path / "error.json").read_text())["message"]
        assert message.startswith(f"env server at {env_server.target} failed: NOT_FOUND: ")
        assert message.endswith(" (the training job cannot continue; its checkpoints are kept)")
    finally:
        env.close()
