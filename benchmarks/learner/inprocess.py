"""bench-learner's in-process Sample Factory env: the learner's own env over a local ``Session``, so the only
difference to the env-server path is the missing gRPC hop. ``python -m benchmarks.learner.inprocess JOB_DIR``
trains one job with it (the learner's ``run_job`` with the env swapped)."""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rlgpt.env_client import EnvStep, SessionEnv
from rlgpt.v1 import learner_pb2
from services.env_server.backends.base import get_backend
from services.env_server.session import Action, Session
from services.env_server.settings import EnvServerSettings
from services.env_server.tasks import parse_reward_terms, parse_task
from services.learner.sf_env import learning_env, load_job_config, slot_seed

INPROCESS_ENV_NAME = "rlgpt_inprocess"


class LocalSession:
    """One env of a local ``Session``, as ``rlgpt.env_client.SessionEnv`` steps it (``OneEnv``).

    The session is built the way the env server builds one for ``CreateSession`` (same task and reward
    parsing, autoreset off, reset through ``Session.reset``) and stepped through the learner's own env
    (``learning_env``), so the only difference to the env-server path is the missing gRPC hop.
    """

    def __init__(self, config: learner_pb2.RLConfig, seed: int):
        if config.skills:
            raise ValueError("the in-process benchmark env takes primitive actions only (no skills)")
        backend = get_backend(config.backend)
        spec = backend.spec
        settings = EnvServerSettings()
        self.actions = list(config.primitive_actions) or list(spec.actions)
        self.image_shape = tuple(spec.image_shape)
        self.vector_shape = (len(spec.vector_labels),)
        self._session = Session(
            session_id=f"inprocess-{seed}", backend=backend, task=parse_task(config.task, spec),
            reward_terms=parse_reward_terms(list(config.reward_terms), spec), seed=seed, num_envs=1,
            episode_length=config.episode_length or spec.default_episode_length,
            actions=[Action(name=name, primitive=spec.actions.index(name)) for name in self.actions],
            skill_max_steps=config.skill_max_steps or settings.default_skill_steps, autoreset=False,
            settings=settings, client="bench-learner")

    def initial_observation(self) -> dict[str, np.ndarray]:
        images, vectors = self._session.observations([0])
        return {"image": images[0], "vector": vectors[0]}

    def reset_env(self, seed: int = 0) -> dict[str, np.ndarray]:
        self._session.reset([0], seed)
        return self.initial_observation()

    def step_env(self, action: int) -> EnvStep:
        out = self._session.step([action])
        info = out.infos[0]
        return EnvStep(observation=self.initial_observation(), reward=float(out.rewards[0]),
                       terminated=bool(out.terminated[0]), truncated=bool(out.truncated[0]),
                       frames=int(out.frames[0]), success=info["success"], achievements=info["achievements"],
                       episode_steps=info["episode_steps"], skill_finished=info.get("skill_finished", False),
                       skill_error=info.get("skill_error"))

    def close(self) -> None:
        self._session.close()


def make_inprocess_env(full_env_name: str, cfg: Any = None, env_config: Any = None,
                       render_mode: str | None = None) -> SessionEnv:
    """Sample Factory's env factory, with ``make_sf_env``'s per-slot seeds and env."""
    config, _doc = load_job_config(Path(cfg.rlgpt_job_dir))
    return learning_env(LocalSession(config, slot_seed(config, env_config)))


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
