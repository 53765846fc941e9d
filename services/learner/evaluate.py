"""Evaluation of a job's latest checkpoint on env-server episodes, with trajectory summaries."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from rlgpt.env_contract import PLAN_ACTION
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
    return play(config, env_server, episodes, seed + EVAL_SEED_OFFSET,
                chooser=None if path is None else policy_chooser(job_dir, path, config, greedy, seed),
                client=f"evaluate:{job_dir.name}", max_frames=max_frames, frames_per_episode=frames_per_episode)


Chooser = Callable[[list[int], np.ndarray, np.ndarray, Mapping[int, tuple[env_pb2.StepInfo, int]]], list[int]]
"""The next actions of the live envs (row r of the images and vectors is env ``live[r]``), given each one's last
step (its info and frames; none before its first)."""


def policy_chooser(job_dir: Path, checkpoint: Path, config: learner_pb2.RLConfig, greedy: bool = False,
                   generator_seed: int = 0) -> Callable[[env_pb2.CreateSessionResponse], Chooser]:
    """A job's policy at ``checkpoint`` choosing (sampling, or ``greedy`` its most probable action)."""
    import torch

    def chooser(session: env_pb2.CreateSessionResponse) -> Chooser:
        actor = Policy.load(job_dir, checkpoint, config, session.observation, len(session.actions))
        generator = torch.Generator().manual_seed(generator_seed)
        return lambda live, pixels, vectors, last: actor.act(pixels, vectors, generator, greedy)

    return chooser


def play(config: learner_pb2.RLConfig, env_server: str, episodes: int, first_seed: int, *,
         chooser: Callable[[env_pb2.CreateSessionResponse], Chooser] | None = None, client: str = "",
         max_frames: int = 1_000_000, frames_per_episode: int = 0) -> learner_pb2.EvaluateResponse:
    """The first episode of ``episodes`` worlds from ``first_seed`` (env i plays world ``first_seed + i``) in one
    session built from ``config``: ``chooser`` (made from the session) acting, or with none every action the kept
    plan (``config.plan``); per plan step, how far the episodes got (``links``)."""
    channel = create_channel(env_server, default_timeout=300)
    stub = env_pb2_grpc.EnvServiceStub(channel)
    session = stub.CreateSession(session_request(config, first_seed, num_envs=episodes, client=client,
                                                 record=True, autoreset=True))
    first = FirstEpisodes(episodes, frames_per_episode)
    plan = PlanProgress([step.skill for step in config.plan], episodes)
    decisions = np.zeros(len(session.actions), np.int64)  # per action, over the counted episodes
    try:
        if chooser is None:
            plan_action = list(session.actions).index(PLAN_ACTION)
            choose: Chooser = lambda live, pixels, vectors, last: [plan_action] * len(live)  # noqa: E731
        else:
            choose = chooser(session)
        pixels, vectors = from_tensor(session.observations.image), from_tensor(session.observations.vector)
        last: dict[int, tuple[env_pb2.StepInfo, int]] = {}
        live = first.live  # row r of pixels and vectors is env live[r]
        while live and first.frames < max_frames:
            first.see(pixels, live)
            actions = choose(live, pixels, vectors, last)
            decisions += np.bincount(actions, minlength=len(decisions))  # live envs only play first episodes
            step = stub.Step(env_pb2.StepRequest(session_id=session.session_id, env_indices=live,
                                                 actions=actions))
            first.record(step, live)
            plan.record(step, live)
            last.update((i, (step.infos[r], step.frames[r])) for r, i in enumerate(live))
            live, pixels, vectors = first.narrow(step, live)
    finally:
        stub.CloseSession(env_pb2.CloseSessionRequest(session_id=session.session_id))
        channel.close()
    response = first.response(plan.links() if config.plan else ())
    total = int(decisions.sum())
    response.action_shares.update({name: n / total for name, n in zip(session.actions, decisions.tolist(),
                                                                      strict=True) if n})
    return response
