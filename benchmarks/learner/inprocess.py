"""bench-learner's in-process Sample Factory env: the learner's own env over a local ``Session``, so the only
difference to the env-server path is the missing gRPC hop. ``python -m benchmarks.learner.inprocess JOB_DIR``
trains one job with it (the learner's ``run_job`` with the env swapped)."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlgpt.env_client import EnvBatch
from rlgpt.v1 import learner_pb2
from services.env_server.backends.base import get_backend
from services.env_server.sessions.actions import Action
from services.env_server.sessions.session import Session
from services.env_server.settings import EnvServerSettings
from services.env_server.tasks import parse_reward_terms, parse_task
from services.learner.sf_env import load_job_config, worker_env
from services.learner.vec_env import SessionVecEnv

INPROCESS_ENV_NAME = "rlgpt_inprocess"


class LocalSession:
    """A local ``Session`` of N envs, as the learner's vector env steps a session (``ManyEnvs``).

    The session is built the way the env server builds one for the learner's ``CreateSession`` (same task and
    reward parsing, autoreset on) and stepped through the learner's own vector env, so the only difference to
    the env-server path is the missing gRPC hop.
    """

    def __init__(self, config: learner_pb2.RLConfig, seed: int, num_envs: int = 1):
        if config.skills:
            raise ValueError("the in-process benchmark env takes primitive actions only (no skills)")
        backend = get_backend(config.backend)
        spec = backend.spec
        settings = EnvServerSettings()
        self.actions = list(config.primitive_actions) or list(spec.actions)
        self.num_envs = num_envs
        self.image_shape = tuple(spec.image_shape)
        self.vector_shape = (len(spec.vector_labels),)
        self.vector_scale = spec.vector_scale
        self._session = Session(
            session_id=f"inprocess-{seed}", backend=backend, task=parse_task(config.task, spec),
            reward_terms=parse_reward_terms(list(config.reward_terms), spec), seed=seed, num_envs=num_envs,
            episode_length=config.episode_length or spec.default_episode_length,
            actions=[Action(name=name, primitive=spec.actions.index(name)) for name in self.actions],
            skill_max_steps=config.skill_max_steps or settings.default_skill_steps, autoreset=True,
            settings=settings, client="bench-learner")
        self.first_observations = self._observations(list(range(num_envs)))

    def _observations(self, indices: list[int]) -> dict[str, np.ndarray]:
        images, vectors = self._session.observations(indices)
        return {"image": images, "vector": vectors}

    def reset(self, env_indices: Sequence[int] = (), seed: int = 0) -> dict[str, np.ndarray]:
        return self._observations(self._session.reset(list(env_indices), seed))

    def step_envs(self, actions: Sequence[int], env_indices: Sequence[int] = ()) -> EnvBatch:
        indices = list(env_indices) or list(range(self.num_envs))
        out = self._session.step(list(actions), indices=indices)
        return EnvBatch(
            observation=self._observations(indices), rewards=out.rewards, terminated=out.terminated,
            truncated=out.truncated, frames=out.frames.astype(np.int64),
            success=np.array([info["success"] for info in out.infos], bool),
            achievements=np.array([len(info["achievements"]) for info in out.infos], np.int64),
            skill_error=np.array(["skill_error" in info for info in out.infos], bool),
            unlocked=[list(info["achievements"]) for info in out.infos])

    def close(self) -> None:
        self._session.close()


def make_inprocess_env(full_env_name: str, cfg: Any = None, env_config: Any = None,
                       render_mode: str | None = None) -> SessionVecEnv:
    """Sample Factory's env factory, with ``make_sf_env``'s sessions per worker and seeds."""
    job_dir = Path(cfg.rlgpt_job_dir)
    config, _doc = load_job_config(job_dir)
    return worker_env(config, env_config, lambda n, seed: LocalSession(config, seed, n), f"inprocess:{job_dir}",
                      int(cfg.worker_num_splits))


def run_inprocess_job(job_dir: Path) -> int:
    """``services.learner.train.run_job`` with the env swapped for the in-process one."""
    from sample_factory.envs.env_utils import register_env

    from services.learner.train import register_components, run_job

    # Register the factory from the importable module, not from __main__: Sample Factory pickles its env
    # registry into spawned worker processes, which must be able to import the function by name.
    module = importlib.import_module("benchmarks.learner.inprocess")
    register_components()
    register_env(INPROCESS_ENV_NAME, module.make_inprocess_env)
    return run_job(job_dir, env_name=INPROCESS_ENV_NAME)



if __name__ == "__main__":
    # A training subprocess: plain logging to its log file, like services.learner.train.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(run_inprocess_job(Path(sys.argv[1]).resolve()))
