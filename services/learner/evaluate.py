"""Evaluation of a job's latest checkpoint on env-server episodes, with trajectory summaries, and the one loop
every evaluation steps its session with (:func:`step_first_episodes`: a policy, a kept plan alone, a chain)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlgpt.env_contract import PLAN_ACTION
from rlgpt.errors import FailedPrecondition, InvalidArgument, NotFound
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2
from services.learner.plan_links import PlanLink, pinned_links
from services.learner.plan_progress import PlanProgress, step_name
from services.learner.policy import FirstEpisodes, Policy, latest_checkpoint
from services.learner.sf_env import connect, load_job_config

log = logging.getLogger(__name__)
EVAL_CALL_SECONDS = 300
"""Deadline of each env-server call of an evaluation (a step of skill or plan actions takes up to K frames each)."""


def check_animate(animate: int, limit: int) -> None:
    """``EvaluateRequest.animate`` (GIFs of that many successful and failed episodes each) within 0..``limit``, the
    env server's max_animations; InvalidArgument says which."""
    if not 0 <= animate <= limit:
        raise InvalidArgument(f"animate={animate}: must be in 0..{limit}, the env server's max_animations (GIFs of "
                              "that many successful and that many failed episodes)")


def evaluate(job_dir: Path, env_server: str, episodes: int, seed: int, checkpoint: Path | None = None,
             max_frames: int = 1_000_000, task: common_pb2.TaskSpec | None = None,
             frames_per_episode: int = 0, episode_length: int = 0, greedy: bool = False,
             plan_alone: bool = False, sampling_seed: int | None = None, animate: int = 0
             ) -> learner_pb2.EvaluateResponse:
    """Runs ``episodes`` episodes in parallel on worlds ``seed``, ``seed + 1``, ... (the caller names them:
    rlgpt/worlds.py) with the policy sampling its actions (its generator seeded with ``sampling_seed``, by default
    ``seed``: the benchmarks keep the one their recorded results sampled with); with
    ``frames_per_episode``, that many of the observations it acted on are sampled from each episode; ``greedy``:
    the policy takes its most probable action instead; ``plan_alone``: no policy, every action the job's kept
    plan (the same worlds: what the policy must beat); ``animate``: GIFs of the first that many successful and
    failed episodes. The episodes start after the job's chain prefix (RLConfig.prefix), as its training's did; its
    plan's policy steps are played by the policies pinned in its directory, as in its training."""
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
    return play(config, env_server, episodes, seed,
                chooser=None if path is None else policy_chooser(
                    job_dir, path, config, greedy, seed if sampling_seed is None else sampling_seed),
                client=f"evaluate:{job_dir.name}", max_frames=max_frames, frames_per_episode=frames_per_episode,
                animate=animate, links=pinned_links(job_dir, config))


Chooser = Callable[[list[int], np.ndarray, np.ndarray, Mapping[int, tuple[env_pb2.StepInfo, int]]], list[int]]
"""The next actions of the live envs (row r of the images and vectors is env ``live[r]``), given each one's last
step (its info and frames; none before its first)."""
AfterStep = Callable[[list[int], list[int], env_pb2.StepResponse], None]
"""Sees each step: the envs stepped, their actions, and the response (row r: env ``live[r]``)."""


def policy_chooser(job_dir: Path, checkpoint: Path, config: learner_pb2.RLConfig, greedy: bool = False,
                   generator_seed: int = 0) -> Callable[[Any], Chooser]:
    """A job's policy at ``checkpoint`` choosing (sampling, or ``greedy`` its most probable action)."""
    import torch

    def chooser(session: Any) -> Chooser:
        actor = Policy.load(job_dir, checkpoint, config, list(session.fields.values()), len(session.actions))
        generator = torch.Generator().manual_seed(generator_seed)
        return lambda live, pixels, vectors, last: actor.act(pixels, vectors, generator, greedy)

    return chooser


def step_first_episodes(session: Any, first: FirstEpisodes, choose: Chooser, *, max_frames: int,
                        after_step: AfterStep | None = None) -> None:
    """Steps the envs of an autoreset ``session`` whose first episode goes on (only those: stepping them all would
    play every env as long as the longest episode, uncounted), ``choose`` acting, until every first episode ended
    or ``max_frames`` were taken; ``first`` books them."""
    pixels, vectors = session.first_observations["image"], session.first_observations["vector"]
    last: dict[int, tuple[env_pb2.StepInfo, int]] = {}
    live = first.live  # row r of pixels and vectors is env live[r]
    while live and first.frames < max_frames:
        first.see(pixels, live)
        actions = choose(live, pixels, vectors, last)
        obs, step = session.step(actions, live)
        first.record(step, live)
        if after_step is not None:
            after_step(live, actions, step)
        last.update((i, (step.infos[r], step.frames[r])) for r, i in enumerate(live))
        live, pixels, vectors = first.narrow(obs, live)


def play(config: learner_pb2.RLConfig, env_server: str, episodes: int, first_seed: int, *,
         chooser: Callable[[Any], Chooser] | None = None, client: str = "",
         max_frames: int = 1_000_000, frames_per_episode: int = 0, animate: int = 0,
         links: Sequence[PlanLink] = ()) -> learner_pb2.EvaluateResponse:
    """The first episode of ``episodes`` worlds from ``first_seed`` (env i plays world ``first_seed + i``) in one
    session built from ``config``: ``chooser`` (made from the session) acting, or with none every action the kept
    plan (``config.plan``); per plan step, how far the episodes got (``links``); ``animate``: GIFs of the first
    that many successful and failed episodes; ``links``: the plan's policy steps (:mod:`~services.learner.plan_links`),
    which their policies play (seeded by ``first_seed``)."""
    session = connect(config, links, env_server, first_seed, timeout=EVAL_CALL_SECONDS, num_envs=episodes,
                      client=client, record=True, autoreset=True, animate=animate)
    first = FirstEpisodes(episodes, frames_per_episode)
    plan = PlanProgress([step_name(step) for step in config.plan], episodes)
    decisions = np.zeros(len(session.actions), np.int64)  # per action, over the counted episodes

    def after_step(live: list[int], actions: list[int], step: env_pb2.StepResponse) -> None:
        decisions[:] += np.bincount(actions, minlength=len(decisions))  # live envs only play first episodes
        plan.record(step, live)

    try:
        if chooser is None:
            plan_action = session.actions.index(PLAN_ACTION)
            choose: Chooser = lambda live, pixels, vectors, last: [plan_action] * len(live)  # noqa: E731
        else:
            choose = chooser(session)
        step_first_episodes(session, first, choose, max_frames=max_frames, after_step=after_step)
    finally:
        session.close()
    response = first.response(plan.links() if config.plan else ())
    total = int(decisions.sum())
    response.action_shares.update({name: n / total for name, n in zip(session.actions, decisions.tolist(),
                                                                      strict=True) if n})
    return response
