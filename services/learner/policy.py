"""What every evaluation shares: a job's trained policy loaded from its checkpoint, and the bookkeeping of each
env's first episode (its summary, sampled frames, frames taken) in an autoreset evaluation session."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlgpt.errors import FailedPrecondition
from rlgpt.frames import FrameSampler
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


def latest_checkpoint(job_dir: Path) -> Path:
    checkpoints = sorted((job_dir / "sf" / job_dir.name / "checkpoint_p0").glob("checkpoint_*.pth"))
    if not checkpoints:
        raise FailedPrecondition(f"job {job_dir.name} has no checkpoint yet (looked in "
                                 f"{job_dir / 'sf' / job_dir.name / 'checkpoint_p0'}); let it train longer")
    return checkpoints[-1]


VECTOR_WEIGHT, ACTION_WEIGHT = "encoder.vector.0.weight", "action_parameterization.distribution_linear.weight"
"""The tensors of a checkpoint (services/learner/model.py) whose shapes say the vector length and action count."""


def _unfit(job_dir: Path, checkpoint: Path, vector: int, actions: int) -> str:
    return (f"checkpoint {checkpoint.name} of job {job_dir.name} does not fit what the env serves now (a vector of "
            f"{vector} entries, {actions} actions): it was trained on other shapes, e.g. before the env's "
            "observation vector changed; train the job again (StartTraining with its config, not a resume).")


def check_fits(job_dir: Path, checkpoint: Path, weights: dict[str, Any], vector: int, actions: int) -> None:
    """FailedPrecondition when ``weights`` (a checkpoint's model) were trained on another vector length or action
    count than the env serves now (``vector``, ``actions``)."""
    trained = (weights[VECTOR_WEIGHT].shape[1] if VECTOR_WEIGHT in weights else vector,
               weights[ACTION_WEIGHT].shape[0] if ACTION_WEIGHT in weights else actions)
    if trained != (vector, actions):
        raise FailedPrecondition(f"{_unfit(job_dir, checkpoint, vector, actions)} The checkpoint's: a vector of "
                                 f"{trained[0]} entries, {trained[1]} actions.")


def check_resumable(job_dir: Path, vector: int, actions: int) -> None:
    """Before a resume: the job's latest checkpoint, if any, fits what the env serves now (Sample Factory would
    otherwise fail in its learner process with torch's size-mismatch error)."""
    import torch

    try:
        checkpoint = latest_checkpoint(job_dir)
    except FailedPrecondition:  # nothing saved yet: the resume starts afresh
        return
    check_fits(job_dir, checkpoint, torch.load(checkpoint, map_location="cpu", weights_only=False)["model"], vector,
               actions)


class Policy:
    """A job's actor-critic, loaded once (CPU), sampling actions of its own action space for a batch of envs."""

    def __init__(self, model: Any):
        self.model = model

    @classmethod
    def load(cls, job_dir: Path, checkpoint: Path, config: learner_pb2.RLConfig,
             fields: Sequence[env_pb2.ObservationField], num_actions: int) -> Policy:
        """The model the job trained (its Sample Factory config) with the weights of ``checkpoint``."""
        import gymnasium as gym
        import torch
        from sample_factory.model.actor_critic import create_actor_critic

        from services.learner.spaces import observation_space
        from services.learner.train import parse_cfg, register_components, sf_argv

        register_components()
        cfg = parse_cfg(sf_argv(config, job_dir, "cpu"), evaluation=True)
        shapes = {f.name: tuple(f.shape) for f in fields}
        scale = next(f.scale for f in fields if f.name == "vector")
        obs_space = observation_space(shapes["image"], shapes["vector"], scale)
        model = create_actor_critic(cfg, obs_space, gym.spaces.Discrete(num_actions))
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        check_fits(job_dir, checkpoint, state["model"], shapes["vector"][0], num_actions)
        try:
            model.load_state_dict(state["model"])
        except RuntimeError as exc:  # torch names each tensor whose shape differs
            raise FailedPrecondition(f"{_unfit(job_dir, checkpoint, shapes['vector'][0], num_actions)} "
                                     f"{str(exc).splitlines()[-1].strip()[:300]}") from None
        model.eval()
        log.info("loaded %s (%d actions)", checkpoint, num_actions)
        return cls(model)

    def act(self, images: np.ndarray, vectors: np.ndarray, generator: torch.Generator, greedy: bool = False
            ) -> list[int]:
        """Sampled actions for ``images`` (uint8 [n, H, W, C]) and ``vectors`` (float32 [n, D]); ``greedy``: the
        most probable ones."""
        import torch

        with torch.no_grad():
            obs = {"image": torch.from_numpy(images.transpose(0, 3, 1, 2).copy()),
                   "vector": torch.from_numpy(np.array(vectors, np.float32, copy=True))}
            out = self.model(obs, torch.zeros(len(images), 1))
            if greedy:
                return out["action_logits"].argmax(dim=-1).tolist()
            probs = torch.softmax(out["action_logits"], dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(1).tolist()


class FirstEpisodes:
    """Each env's first episode in an autoreset session. Only the envs whose first episode goes on (``live``)
    need stepping (``StepRequest.env_indices``): stepping them all would play every env as long as the longest
    episode, uncounted."""

    def __init__(self, num_envs: int, frames_per_episode: int = 0):
        self.num_envs = num_envs
        self.frames_per_episode = frames_per_episode
        self.summaries: dict[int, common_pb2.EpisodeSummary] = {}
        self._samplers = [FrameSampler(frames_per_episode) for _ in range(num_envs)]
        self._episode_steps = [0] * num_envs  # env frames each first episode has taken so far
        self.frames = 0
        """Env frames the counted episodes took."""

    @property
    def done(self) -> bool:
        return len(self.summaries) == self.num_envs

    @property
    def live(self) -> list[int]:
        """The envs whose first episode goes on, in env order."""
        return [i for i in range(self.num_envs) if self.counting(i)]

    def counting(self, i: int) -> bool:
        return i not in self.summaries

    def see(self, pixels: np.ndarray, envs: Sequence[int] | None = None) -> None:
        """The observations about to be acted on (row r: env ``envs[r]``; all envs when None), sampled for the
        episodes still counted."""
        if self.frames_per_episode:
            for row, i in enumerate(range(self.num_envs) if envs is None else envs):
                if self.counting(i):
                    self._samplers[i].add(self._episode_steps[i], pixels[row])

    def record(self, step: env_pb2.StepResponse, envs: Sequence[int] | None = None) -> None:
        """Books a step whose row r is env ``envs[r]`` (row r is env r when None)."""
        for row, info in enumerate(step.infos):
            i = row if envs is None else envs[row]
            if not self.counting(i):
                continue
            self.frames += step.frames[row]
            if step.terminated[row] or step.truncated[row]:
                self.summaries[i] = info.episode
            self._episode_steps[i] = info.episode_steps

    def narrow(self, obs: Mapping[str, np.ndarray], envs: Sequence[int]) -> tuple[list[int], np.ndarray, np.ndarray]:
        """After :meth:`record` of a step whose row r is env ``envs[r]``: the envs whose first episode goes on,
        with their rows of the step's images and vectors (``obs``; row r of those is env r of the returned list)."""
        rows = [r for r, i in enumerate(envs) if self.counting(i)]
        return [envs[r] for r in rows], obs["image"][rows], obs["vector"][rows]

    def response(self, links: Sequence[learner_pb2.LinkStats] = ()) -> learner_pb2.EvaluateResponse:
        order = sorted(self.summaries)
        episodes = [self.summaries[i] for i in order]
        frames = []
        if self.frames_per_episode:
            for i in order:
                steps, pngs = self._samplers[i].sample()
                frames.append(env_pb2.EpisodeFrames(png=pngs, steps=steps))
        return learner_pb2.EvaluateResponse(
            success_rate=sum(e.success for e in episodes) / max(1, len(episodes)),
            returns=[e.episode_return for e in episodes], episodes=episodes, frames=frames, links=links)
