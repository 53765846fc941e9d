"""bench-learner's in-process env is the learner's env over a local session: same worlds, rewards, info and stats."""

from __future__ import annotations

import types

import numpy as np

from benchmarks.learner.inprocess import make_inprocess_env
from benchmarks.learner.measure import rl_config
from services.learner.jobs import write_job_config
from services.learner.sf_env import make_sf_env


def test_in_process_env_steps_as_the_env_server_env(env_server, tmp_path) -> None:
    config = rl_config(frames=1000, seed=2)
    config.episode_length = 40
    config.envs_per_worker = 4
    write_job_config(tmp_path, config, {"env_server": env_server.target})
    cfg = types.SimpleNamespace(rlgpt_job_dir=str(tmp_path), worker_num_splits=2)
    slot = types.SimpleNamespace(worker_index=1, vector_index=1, env_id=3)  # worker 1's second split
    local, remote = make_inprocess_env("rlgpt_inprocess", cfg, slot), make_sf_env("rlgpt", cfg, slot)
    actions = np.random.default_rng(0).integers(0, remote.action_space.n, size=(90, remote.num_agents))
    try:
        assert local.observation_space == remote.observation_space and local.action_names == remote.action_names
        assert local.num_agents == remote.num_agents == 2
        for env_obs in zip(local.reset()[0].values(), remote.reset()[0].values(), strict=True):
            assert np.array_equal(*env_obs)
        episodes = 0
        for step_actions in actions:
            (l_obs, l_rew, l_term, l_trunc, l_info), (r_obs, r_rew, r_term, r_trunc, r_info) = (
                local.step(step_actions), remote.step(step_actions))
            assert np.array_equal(l_obs["image"], r_obs["image"]) and np.array_equal(l_obs["vector"], r_obs["vector"])
            assert np.allclose(l_rew, r_rew) and (l_term == r_term).all() and (l_trunc == r_trunc).all()
            l_stats, r_stats = l_info["episode_extra_stats"], r_info["episode_extra_stats"]
            assert l_stats.keys() == r_stats.keys()
            for key, value in l_stats.items():
                if isinstance(value, dict):  # the decisions per action, by action
                    assert value.keys() == r_stats[key].keys(), key
                    assert all(np.array_equal(v, r_stats[key][k]) for k, v in value.items()), key
                else:
                    assert np.array_equal(value, r_stats[key]), key
            episodes += int((l_term | l_trunc).sum())
        assert episodes >= 4  # stats of whole episodes compared, and the worlds after the server's resets
    finally:
        local.close()
        remote.close()


