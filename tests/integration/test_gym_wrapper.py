"""A client-side gymnasium wrapper of one session passes gymnasium's own env checker."""

import numpy as np
from gymnasium.utils.env_checker import check_env

from rlgpt.gym_env import RemoteEnv
from rlgpt.v1 import env_pb2
from services.env_server.skills.reference import COLLECT_WOOD


def test_check_env_on_remote_env(env_server) -> None:
    env = RemoteEnv(env_server.target, task="collect_wood", seed=3)
    try:
        check_env(env, skip_render_check=True)
        obs, _ = env.reset(seed=5)
        assert obs["image"].shape == (64, 64, 3) and obs["vector"].dtype == np.float32
    finally:
        env.close()


def test_remote_env_with_skill_reports_frames(env_server) -> None:
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="gym_wood", code=COLLECT_WOOD, replace=True))
    env = RemoteEnv(env_server.target, task="collect_wood", seed=1, skills=["gym_wood"], skill_max_steps=8)
    try:
        env.reset()
        assert env.action_space.n == 18 and env.action_names[-1] == "skill:gym_wood"
        _, _, _terminated, _truncated, info = env.step(17)
        assert 1 <= info["frames"] <= 8
    finally:
        env.close()
