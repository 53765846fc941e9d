"""The learner's Sample Factory env: ``rlgpt.env_client.SessionEnv`` over one env-server session.

Observations are ``{"image": uint8 CHW, "vector": float32}`` (Sample Factory's conv encoders want
CHW); actions are Discrete(primitives + skills). A skill action may consume up to K frames: the
frames are counted per episode and reported through ``info["episode_extra_stats"]`` so the
learner's frame budget and FPS count frames, not decisions. A failing skill ends its episode. An env
server that goes away ends the job at once (``error.json``), instead of leaving Sample Factory waiting
on a dead worker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from rlgpt.env_client import OneEnv, RemoteSession, SessionEnv
from rlgpt.v1 import env_pb2, learner_pb2

ENV_NAME = "rlgpt"


def load_job_config(job_dir: Path) -> tuple[learner_pb2.RLConfig, dict[str, Any]]:
    doc = json.loads((job_dir / "config.json").read_text())
    return json_format.ParseDict(doc["config"], learner_pb2.RLConfig()), doc


def session_request(config: learner_pb2.RLConfig, seed: int, *, num_envs: int = 1, client: str = "",
                    record: bool = False, autoreset: bool = False) -> env_pb2.CreateSessionRequest:
    return env_pb2.CreateSessionRequest(
        backend=config.backend, task=config.task, seed=seed, num_envs=num_envs,
        reward_terms=list(config.reward_terms), episode_length=config.episode_length,
        primitive_actions=list(config.primitive_actions), skills=list(config.skills),
        skill_max_steps=config.skill_max_steps, autoreset=autoreset, client=client,
        record_trajectories=record)


def slot_seed(config: learner_pb2.RLConfig, env_config: Any) -> int:
    """The world seed of Sample Factory's env slot: distinct and reproducible per slot."""
    env_id = int(env_config.env_id) if env_config is not None else 0
    return int(config.seed) + 1_000_003 * (env_id + 1)


def learning_env(session: OneEnv) -> SessionEnv:
    """What the learner trains on: images CHW, the session's own worlds, a failing skill ends its episode."""
    return SessionEnv(session, channels_first=True, reseed=False, end_on_skill_error=True)


def env_server_env(config: learner_pb2.RLConfig, target: str, seed: int, job_dir: Path) -> SessionEnv:
    """One env of a new session on ``target``; a lost server writes ``job_dir/error.json`` and raises."""

    def lost(message: str) -> None:
        (job_dir / "error.json").write_text(json.dumps(
            {"message": f"{message} (the training job cannot continue; its checkpoints are kept)"}))

    return learning_env(RemoteSession.connect(
        target, session_request(config, seed, client=f"learner:{job_dir}"), timeout=120, on_lost=lost))


def make_sf_env(full_env_name: str, cfg: Any = None, env_config: Any = None, render_mode: str | None = None
                ) -> SessionEnv:
    """Sample Factory's env factory: reads the job's config.json; one seed per env slot."""
    job_dir = Path(cfg.rlgpt_job_dir)
    config, doc = load_job_config(job_dir)
    return env_server_env(config, doc["env_server"], slot_seed(config, env_config), job_dir)
