"""The learner's Sample Factory env: each rollout worker's envs in one env-server session (``vec_env``).

Observations are ``{"image": uint8 CHW, "vector": float32}`` (Sample Factory's conv encoders want
CHW); actions are Discrete(primitives + skills (+ the plan)); a kept plan's policy steps are played by their
policies in the session (``plan_session``). A skill action may consume up to K frames: the
frames are counted per episode and reported through ``info["episode_extra_stats"]`` so the
learner's frame budget and FPS count frames, not decisions. A failing skill ends its episode. A job
with several env servers puts its workers' sessions on them in turn. An env server that goes away ends
the job at once (``error.json``), instead of leaving Sample Factory waiting on a dead worker.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from rlgpt.env_client import ManyEnvs, RemoteSession
from rlgpt.v1 import env_pb2, learner_pb2
from rlgpt.worlds import training_worlds
from services.learner.frame_budget import FrameMeter
from services.learner.plan_links import PlanLink, pinned_links, session_config
from services.learner.plan_session import PlanPolicySession
from services.learner.vec_env import SessionVecEnv, SharedSessions

ENV_NAME = "rlgpt"


def load_job_config(job_dir: Path) -> tuple[learner_pb2.RLConfig, dict[str, Any]]:
    doc = json.loads((job_dir / "config.json").read_text())
    return json_format.ParseDict(doc["config"], learner_pb2.RLConfig()), doc


def session_request(config: learner_pb2.RLConfig, seed: int, *, num_envs: int = 1, client: str = "",
                    record: bool = False, autoreset: bool = False, animate: int = 0) -> env_pb2.CreateSessionRequest:
    """A session of a job's config: its training's and its own evaluations' (which start after its chain's prefix
    too); ``animate``: GIFs of that many successful and failed episodes (needs ``record``)."""
    return env_pb2.CreateSessionRequest(
        backend=config.backend, task=config.task, seed=seed, num_envs=num_envs,
        reward_terms=list(config.reward_terms), episode_length=config.episode_length,
        primitive_actions=list(config.primitive_actions), skills=list(config.skills),
        skill_max_steps=config.skill_max_steps, autoreset=autoreset, client=client,
        record_trajectories=record, stages=[env_pb2.Stage(success=step.success) for step in config.plan],
        plan=[step.skill for step in config.plan], observe=list(config.observe),
        plan_interrupt=config.plan_interrupt, prefix=list(config.prefix), animate=animate,
        guards=list(config.guards))


def env_server_for(doc: dict[str, Any], worker_index: int) -> str:
    """The env server a rollout worker's session lives on: the job's servers in turn, one per worker."""
    targets = doc.get("env_servers") or [doc["env_server"]]
    return targets[worker_index % len(targets)]


def connect(config: learner_pb2.RLConfig, links: Sequence[PlanLink], target: str, seed: int, *, timeout: float,
            on_lost: Callable[[str], None] | None = None, streaming: bool = False, **request: Any
            ) -> RemoteSession | PlanPolicySession:
    """A session of ``config`` (``request``: :func:`session_request`'s options) on ``target``; with ``links`` (its
    plan's policy steps), one that serves them too, wrapped so that the learner plays them."""
    session = RemoteSession.connect(target, session_request(session_config(config, links), seed, **request),
                                    timeout=timeout, on_lost=on_lost, streaming=streaming)
    if not links:
        return session
    try:
        return PlanPolicySession(session, config, links, seed)
    except BaseException:
        session.close()
        raise


def remote_session(config: learner_pb2.RLConfig, target: str, num_envs: int, seed: int, job_dir: Path
                   ) -> RemoteSession | PlanPolicySession:
    """A new autoreset session of ``num_envs`` envs on ``target`` that tells its prefix's frames (and plays its
    plan's policy steps, pinned in ``job_dir``); a lost server writes ``job_dir/error.json``."""

    def lost(message: str) -> None:
        # Every rollout worker of the job may lose its server at once: each writes its own file and renames it,
        # so that a reader (job_watch, the learner) never meets a half-written error.json.
        tmp = job_dir / f"error.json.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"message": f"{message} (the training job cannot continue; its checkpoints are "
                                              "kept)"}))
        os.replace(tmp, job_dir / "error.json")

    return connect(config, pinned_links(job_dir, config), target, seed, timeout=120, on_lost=lost, streaming=True,
                   num_envs=num_envs, autoreset=True, client=f"learner:{job_dir}")


_WORKER_SESSIONS = SharedSessions()


def episode_log(job_dir: Path, worker: int, split: int) -> Callable[[dict[str, Any]], None]:
    """Appends each finished episode (its end time, frames, achievements, success, return) as a JSON line to
    ``job_dir/episodes/worker<W>-<S>.jsonl``: what benchmarks score a training on (Crafter's protocol counts
    every training episode)."""
    path = job_dir / "episodes" / f"worker{worker}-{split}.jsonl"
    path.parent.mkdir(exist_ok=True)

    def log(episode: dict[str, Any]) -> None:
        with path.open("a") as f:
            f.write(json.dumps({"time": time.time(), **episode}) + "\n")

    return log


def worker_env(config: learner_pb2.RLConfig, env_config: Any, new_session: Callable[[int, int], ManyEnvs],
               owner: str, splits: int, record_episodes: Path | None = None, budget_dir: Path | None = None
               ) -> SessionVecEnv:
    """The vector env of one split of a rollout worker: its share of the worker's one session.

    ``new_session(num_envs, seed)`` creates a session; the ``splits`` of a worker of ``owner`` (a job) share it,
    each stepping its own group of ``envs_per_worker / splits`` envs.
    Sample Factory's probe for the spaces (no ``env_config``) gets a session of its own with one split's envs.
    With ``budget_dir`` (the job's dir), each split counts its frames there and stops at ``config.env_frames``
    (``frame_budget``).
    """
    envs = config.envs_per_worker
    group = envs // splits
    if env_config is None:
        return SessionVecEnv(new_session(group, training_worlds(int(config.seed), 0)), range(group))
    worker, split = int(env_config.worker_index), int(env_config.vector_index)
    key = (owner, worker)
    session = _WORKER_SESSIONS.acquire(key, lambda: new_session(envs, training_worlds(int(config.seed), worker)))
    return SessionVecEnv(session, range(split * group, (split + 1) * group),
                         on_close=lambda: _WORKER_SESSIONS.release(key),
                         on_episode=episode_log(record_episodes, worker, split) if record_episodes else None,
                         meter=FrameMeter(budget_dir, worker, split, int(config.env_frames)) if budget_dir else None)


def make_sf_env(full_env_name: str, cfg: Any = None, env_config: Any = None, render_mode: str | None = None
                ) -> SessionVecEnv:
    """Sample Factory's env factory (batched sampling): reads the job's config.json."""
    job_dir = Path(cfg.rlgpt_job_dir)
    config, doc = load_job_config(job_dir)
    worker = int(env_config.worker_index) if env_config is not None else 0

    def new_session(num_envs: int, seed: int) -> ManyEnvs:
        return remote_session(config, env_server_for(doc, worker), num_envs, seed, job_dir)

    return worker_env(config, env_config, new_session, str(job_dir), int(cfg.worker_num_splits),
                      job_dir if doc.get("record_episodes") else None, budget_dir=job_dir)
