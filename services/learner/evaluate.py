"""Evaluation of a job's latest checkpoint on env-server episodes, with trajectory summaries."""

from __future__ import annotations

import logging
from pathlib import Path

from rlgpt.env_client import PLAN_ACTION
from rlgpt.errors import FailedPrecondition, NotFound
from rlgpt.grpc_client import create_channel
from rlgpt.tensors import from_tensor
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2
from services.learner.plan_progress import PlanProgress
from services.learner.policy import EVAL_SEED_OFFSET, FirstEpisodes, Policy, latest_checkpoint
from services.learner.sf_env import load_job_config, session_request

log = logging.getLogger(__name__)


def evaluate(job_dir: Path, env_server: str, episodes: int, seed: int, checkpoint: Path | None = None,
             max_frames: int = 1_000_000, task: common_pb2.TaskSpec | None = None,
             frames_per_episode: int = 0, episode_length: int = 0, greedy: bool = False,
             plan_alone: bool = False) -> learner_pb2.EvaluateResponse:
    """Runs ``episodes`` episodes in parallel (one env each) with the policy sampling its actions; with
    ``frames_per_episode``, that many of the observations it acted on are sampled from each episode; ``greedy``:
    the policy takes its most probable action instead; ``plan_alone``: no policy, every action the job's kept
    plan (the same worlds: what the policy must beat)."""
    import torch

    if not (job_dir / "config.json").exists():
        raise NotFound(f"no job directory at {job_dir}")
    config, _doc = load_job_config(job_dir)
    if plan_alone and not config.plan:
        raise FailedPrecondition(f"job {job_dir.name} has no kept plan (RLConfig.plan): plan_alone evaluates one")
    if task is not None and (task.name or task.success):
        config.task.CopyFrom(task)
    if episode_length:
        config.episode_length = episode_length
    path = None if plan_alone else checkpoint or latest_checkpoint(job_dir)
    channel = create_channel(env_server, default_timeout=300)
    stub = env_pb2_grpc.EnvServiceStub(channel)
    session = stub.CreateSession(session_request(config, seed + EVAL_SEED_OFFSET, num_envs=episodes,
                                                 client=f"evaluate:{job_dir.name}", record=True,
                                                 autoreset=True))
    first = FirstEpisodes(episodes, frames_per_episode)
    plan = PlanProgress([step.skill for step in config.plan], episodes)
    try:
        policy = None if path is None else Policy.load(job_dir, path, config, session.observation,
                                                       len(session.actions))
        plan_action = list(session.actions).index(PLAN_ACTION) if plan_alone else -1
        pixels, vectors = from_tensor(session.observations.image), from_tensor(session.observations.vector)
        generator = torch.Generator().manual_seed(seed)
        live = first.live  # row r of pixels and vectors is env live[r]
        while live and first.frames < max_frames:
            first.see(pixels, live)
            actions = [plan_action] * len(live) if policy is None else policy.act(pixels, vectors, generator, greedy)
            step = stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=actions, env_indices=live))
            first.record(step, live)
            plan.record(step, live)
            rows = [r for r, i in enumerate(live) if first.counting(i)]
            live = [live[r] for r in rows]
            pixels, vectors = from_tensor(step.observations.image)[rows], from_tensor(step.observations.vector)[rows]
    finally:
        stub.CloseSession(env_pb2.CloseSessionRequest(session_id=session.session_id))
        channel.close()
    return first.response(plan.links() if config.plan else ())
