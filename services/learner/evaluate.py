"""Evaluation of a job's latest checkpoint on env-server episodes, with trajectory summaries."""

from __future__ import annotations

import logging
from pathlib import Path

import gymnasium as gym
import numpy as np

from rlgpt.errors import FailedPrecondition, NotFound
from rlgpt.frames import FrameSampler
from rlgpt.grpc_client import create_channel
from rlgpt.tensors import from_tensor
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2
from services.learner.sf_env import load_job_config, session_request

log = logging.getLogger(__name__)


def latest_checkpoint(job_dir: Path) -> Path:
    checkpoints = sorted((job_dir / "sf" / job_dir.name / "checkpoint_p0").glob("checkpoint_*.pth"))
    if not checkpoints:
        raise FailedPrecondition(f"job {job_dir.name} has no checkpoint yet (looked in "
                                 f"{job_dir / 'sf' / job_dir.name / 'checkpoint_p0'}); let it train longer")
    return checkpoints[-1]


def evaluate(job_dir: Path, env_server: str, episodes: int, seed: int, checkpoint: Path | None = None,
             max_frames: int = 1_000_000, task: common_pb2.TaskSpec | None = None,
             frames_per_episode: int = 0) -> learner_pb2.EvaluateResponse:
    """Runs ``episodes`` episodes in parallel (one env each) with the policy sampling its actions; with
    ``frames_per_episode``, that many of the observations it acted on are sampled from each episode."""
    import torch
    from sample_factory.model.actor_critic import create_actor_critic

    from services.learner.train import parse_cfg, register_components, sf_argv

    if not (job_dir / "config.json").exists():
        raise NotFound(f"no job directory at {job_dir}")
    config, _doc = load_job_config(job_dir)
    if task is not None and (task.name or task.success):
        config.task.CopyFrom(task)
    path = checkpoint or latest_checkpoint(job_dir)
    register_components()
    cfg = parse_cfg(sf_argv(config, job_dir, "cpu"), evaluation=True)
    channel = create_channel(env_server, default_timeout=300)
    stub = env_pb2_grpc.EnvServiceStub(channel)
    # Evaluation worlds are not training worlds: a seed far from the training seeds.
    session = stub.CreateSession(session_request(config, seed + 7_000_001, num_envs=episodes,
                                                 client=f"evaluate:{job_dir.name}", record=True,
                                                 autoreset=True))
    try:
        fields = {f.name: f for f in session.observation}
        h, w, c = fields["image"].shape
        obs_space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (c, h, w), np.uint8),
                                     "vector": gym.spaces.Box(-1e6, 1e6, tuple(fields["vector"].shape), np.float32)})
        model = create_actor_critic(cfg, obs_space, gym.spaces.Discrete(len(session.actions)))
        state = torch.load(path, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        model.eval()
        summaries: dict[int, common_pb2.EpisodeSummary] = {}
        samplers = [FrameSampler(frames_per_episode) for _ in range(episodes)]
        episode_steps = [0] * episodes  # env frames each env's first episode has taken so far
        observations = session.observations
        frames = 0
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            while len(summaries) < episodes and frames < max_frames:
                pixels = from_tensor(observations.image)
                if frames_per_episode:
                    for i in range(episodes):
                        if i not in summaries:
                            samplers[i].add(episode_steps[i], pixels[i])
                images = torch.from_numpy(pixels.transpose(0, 3, 1, 2).copy())
                vectors = torch.from_numpy(from_tensor(observations.vector).copy())
                out = model({"image": images, "vector": vectors}, torch.zeros(episodes, 1))
                probs = torch.softmax(out["action_logits"], dim=-1)
                actions = torch.multinomial(probs, 1, generator=generator).squeeze(1).tolist()
                done = set(summaries)  # finished envs play on (autoreset); their later episodes are ignored
                step = stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=actions))
                frames += sum(f for i, f in enumerate(step.frames) if i not in done)
                for i, info in enumerate(step.infos):
                    if i not in summaries and (step.terminated[i] or step.truncated[i]):
                        summaries[i] = info.episode
                    episode_steps[i] = info.episode_steps
                observations = step.observations
    finally:
        stub.CloseSession(env_pb2.CloseSessionRequest(session_id=session.session_id))
        channel.close()
    order = sorted(summaries)
    ordered = [summaries[i] for i in order]
    frames = []
    if frames_per_episode:
        for i in order:
            steps, pngs = samplers[i].sample()
            frames.append(env_pb2.EpisodeFrames(png=pngs, steps=steps))
    return learner_pb2.EvaluateResponse(
        success_rate=sum(e.success for e in ordered) / max(1, len(ordered)),
        returns=[e.episode_return for e in ordered], episodes=ordered, frames=frames)
