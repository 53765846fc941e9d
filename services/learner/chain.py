"""Evaluation of a chain of controllers on the whole task (the long-horizon controller of RL-GPT).

One env-server session (stepped through ``RemoteSession`` by :func:`~services.learner.evaluate.step_first_episodes`,
as every evaluation is) of one env per episode (autoreset, trajectories recorded), whose stages are the links'
success conditions; per env, :class:`~services.learner.chain_links.LinkStepper` says which link acts. A coded
link issues its skill action again and again; a policy link samples the job's policy, its action indices mapped
onto the session's. Each env's first episode counts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from rlgpt.env_client import RemoteSession
from rlgpt.env_contract import SKILL_PREFIX
from rlgpt.errors import InvalidArgument, NotFound, Unavailable, shown
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import env_pb2, env_pb2_grpc, learner_pb2
from rlgpt.validation import Problems
from services.learner.chain_links import Link, LinkStepper
from services.learner.evaluate import EVAL_CALL_SECONDS, step_first_episodes
from services.learner.policy import FirstEpisodes, Policy, latest_checkpoint
from services.learner.rl_config import DEFAULT_EPISODE_LENGTH
from services.learner.sf_env import load_job_config
from services.learner.spaces import job_actions

log = logging.getLogger(__name__)
MAX_CHAIN_LINKS = 16
MAX_LINK_NAME_CHARS = 128


def check_chain(request: learner_pb2.EvaluateRequest) -> None:
    """The chain's own fields (the servicer checks episodes and frames as for any Evaluate); InvalidArgument
    lists every problem."""
    p = Problems()
    p.in_range("chain length", len(request.chain), 1, MAX_CHAIN_LINKS)
    if not request.HasField("task") or not (request.task.name or request.task.success):
        p.add("task is required with a chain: the whole task (an achievement name or success conditions), "
              "which judges each episode")
    if request.episode_length < 0:
        p.add(f"episode_length={request.episode_length} must be >= 0 (0: {DEFAULT_EPISODE_LENGTH})")
    for i, link in enumerate(request.chain[:MAX_CHAIN_LINKS]):
        where = f"chain[{i}] ({shown(link.name)})"
        p.chars(f"chain[{i}].name", link.name, MAX_LINK_NAME_CHARS)
        kind = link.WhichOneof("controller")
        if kind is None or not getattr(link, kind):
            p.add(f"{where}: set its controller, a registered skill (skill) or a training job (job_id)")
        if link.max_frames < 0:
            p.add(f"{where}: max_frames={link.max_frames} must be >= 0 (0: until the episode ends)")
    p.raise_if_any()


def chain_backend(configs: dict[str, learner_pb2.RLConfig]) -> str:
    """The backend of the chain's jobs (the server's default when there are none); one backend for all."""
    backends = {c.backend for c in configs.values()}
    if len(backends) > 1:
        raise InvalidArgument(f"the chain's jobs were trained on different backends ({', '.join(sorted(backends))});"
                              " one session runs one backend")
    return backends.pop() if backends else ""


def chain_skills(links: Sequence[learner_pb2.ChainLink], configs: dict[str, learner_pb2.RLConfig]) -> list[str]:
    """Every skill a link runs or a linked job's action space holds, once each, in order of appearance."""
    names: list[str] = []
    for link in links:
        for name in [link.skill] if link.skill else list(configs[link.job_id].skills):
            if name not in names:
                names.append(name)
    return names


def skill_steps(links: Sequence[learner_pb2.ChainLink], configs: dict[str, learner_pb2.RLConfig],
                episode_length: int, server_max: int) -> int:
    """K: long enough for a coded link to run its whole budget in one action (the server's limit at most); with
    no coded link, the largest K a linked job trained with."""
    budgets = [link.max_frames or episode_length for link in links if link.skill]
    wanted = max(budgets) if budgets else max([c.skill_max_steps for c in configs.values()] + [1])
    return max(1, min(wanted, server_max))


def _env_call(method: Callable[[Any], Any], request: Any, env_server: str) -> Any:
    """An env-server call whose refusals become the learner's own errors (an unknown skill stays NOT_FOUND)."""
    try:
        return method(request)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
            raise InvalidArgument(f"the env server refused the chain's session: {exc.details()}") from None
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            raise NotFound(f"the env server refused the chain's session: {exc.details()}") from None
        raise Unavailable(f"env server at {env_server} did not serve the chain ({exc.code().name}: "
                          f"{exc.details()})") from None


def _chain_session(request: learner_pb2.EvaluateRequest, configs: dict[str, learner_pb2.RLConfig], backend: str,
                   env_server: str) -> tuple[RemoteSession, env_pb2.DescribeResponse]:
    """The chain's session on worlds ``request.seed`` upward (one env per episode, autoreset, trajectories
    recorded, ``request.animate`` of them animated; its stages the links' success conditions; no prefix: the chain
    runs its earlier links itself), and the backend's Describe."""
    links = list(request.chain)
    channel = create_channel(env_server, default_timeout=EVAL_CALL_SECONDS)
    stub = env_pb2_grpc.EnvServiceStub(channel)
    try:
        describe = _env_call(stub.Describe, env_pb2.DescribeRequest(backend=backend), env_server)
    except BaseException:
        channel.close()
        raise
    length = request.episode_length or DEFAULT_EPISODE_LENGTH
    session = _env_call(lambda asked: RemoteSession(stub, asked, EVAL_CALL_SECONDS, target=env_server,
                                                    channel=channel), env_pb2.CreateSessionRequest(
        backend=backend, task=request.task, seed=request.seed, num_envs=request.episodes,
        episode_length=length, skills=chain_skills(links, configs),
        skill_max_steps=skill_steps(links, configs, length, describe.limits.max_skill_steps),
        autoreset=True, client="evaluate:chain", record_trajectories=True, animate=request.animate,
        stages=[env_pb2.Stage(success=link.success) for link in links], guards=list(request.guards)), env_server)
    return session, describe


def evaluate_chain(request: learner_pb2.EvaluateRequest, job_dirs: dict[str, Path], env_server: str,
                   max_frames: int = 1_000_000) -> learner_pb2.EvaluateResponse:
    """Runs ``request.episodes`` episodes of the chain (``job_dirs``: every linked job's directory) on worlds
    ``request.seed`` upward, the policies' generator seeded with it."""
    links = list(request.chain)
    configs = {job: load_job_config(job_dir)[0] for job, job_dir in job_dirs.items()}
    kept = sorted(job for job, config in configs.items() if config.plan)
    if kept:  # a chain session's stages are its links: a policy that keeps its own plan cannot be a link
        raise InvalidArgument(f"job {shown(kept[0])} keeps a plan of its own; evaluate it alone (Evaluate with its "
                              "job_id), not as a link of a chain")
    checkpoints = {job: latest_checkpoint(job_dir) for job, job_dir in job_dirs.items()}
    session, describe = _chain_session(request, configs, chain_backend(configs), env_server)
    try:
        import torch

        index = {name: i for i, name in enumerate(session.actions)}
        fields = list(session.fields.values())
        policies = {job: Policy.load(job_dirs[job], checkpoints[job], config, fields,
                                     len(job_actions(config, describe.actions)))
                    for job, config in configs.items()}
        to_session = {job: np.array([index[a] for a in job_actions(config, describe.actions)])
                      for job, config in configs.items()}
        stepper = LinkStepper([Link.from_proto(link) for link in links], request.episodes)
        first = FirstEpisodes(request.episodes, request.frames_per_episode)
        idle = index.get(describe.action_roles.idle, 0)  # the probe's action, and any env no link controls
        generator = torch.Generator().manual_seed(request.seed)
        probe = True  # the env judges stages after a frame: a first idle frame shows which links are done

        def choose(live: list[int], pixels: np.ndarray, vectors: np.ndarray, last: Any) -> list[int]:
            actions = [idle] * len(live)
            by_job: dict[str, list[int]] = {}
            for row, i in enumerate(live):
                link = stepper.controller(i)
                if link is None or probe:
                    continue
                if links[link].skill:
                    actions[row] = index[SKILL_PREFIX + links[link].skill]
                else:
                    by_job.setdefault(links[link].job_id, []).append(row)
            for job, rows in by_job.items():  # one batch per policy
                chosen = policies[job].act(pixels[rows], vectors[rows], generator, request.greedy)
                for row, action in zip(rows, to_session[job][chosen].tolist(), strict=True):
                    actions[row] = action
            return actions

        def after_step(live: list[int], actions: list[int], step: env_pb2.StepResponse) -> None:
            nonlocal probe
            for row, (i, info) in enumerate(zip(live, step.infos, strict=True)):
                stepper.after_step(i, frames=step.frames[row], stages_done=list(info.stages_done),
                                   skill_error=info.HasField("skill_error"), skill_finished=info.skill_finished,
                                   episode_ended=step.terminated[row] or step.truncated[row], probe=probe)
            probe = False

        step_first_episodes(session, first, choose, max_frames=max_frames, after_step=after_step)
    finally:
        session.close()
    response = first.response(stepper.stats())
    log.info("chain of %d links on %s: success %.2f over %d episodes; links %s", len(links),
             request.task.name or "task", response.success_rate, len(response.episodes),
             [(s.name, s.reached, s.succeeded) for s in response.links])
    return response
