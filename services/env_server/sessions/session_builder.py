"""A Session from a CreateSessionRequest: sizes checked against the server's limits, then the backend,
task, reward terms and action space (actions.py) read for that backend."""

from __future__ import annotations

import numpy as np

from rlgpt.errors import InvalidArgument, join_problems, shown
from rlgpt.observation_choice import choices, observed
from rlgpt.v1 import env_pb2
from services.env_server.backends.base import Backend, get_backend
from services.env_server.sessions.actions import action_space, plan_action
from services.env_server.sessions.guarded import parse_guards
from services.env_server.sessions.macro_actions import PlanInterrupt
from services.env_server.sessions.prefix import parse_prefix
from services.env_server.sessions.session import Session
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillRegistry
from services.env_server.tasks import parse_reward_terms, parse_stages, parse_task


def _check_range(field: str, value: int, low: int, high: int, problems: list[str]) -> None:
    if not low <= value <= high:
        problems.append(f"{field}={value} must be in {low}..{high}")


def observe_mask(backend: Backend, chosen: list[str]) -> np.ndarray | None:
    """The vector entries a session fills (1) and leaves at 0, from the request's ``observe``; None: all."""
    if not chosen:
        return None
    labels = backend.spec.vector_labels
    if len(chosen) > len(choices(labels)):
        raise InvalidArgument(f"observe names {len(chosen)} entries; there are {len(choices(labels))} labels and "
                              "groups")
    keep, unknown = observed(labels, chosen)
    if unknown:
        raise InvalidArgument(f"observe: unknown {', '.join(shown(name) for name in unknown[:5])}; name a vector "
                              f"label or group: {', '.join(choices(labels))}")
    return np.asarray(keep, dtype=np.float32)


def plan_interrupt(backend: Backend, request: env_pb2.CreateSessionRequest, settings: EnvServerSettings
                   ) -> PlanInterrupt:
    """When the session's plan actions end early (CreateSessionRequest.plan_interrupt)."""
    asked = request.plan_interrupt
    if not asked.damage and not asked.threat_within:
        return PlanInterrupt()
    problems = []
    if not request.plan:
        problems.append("plan_interrupt says when a plan action ends early: it needs a plan")
    if asked.threat_within:
        _check_range("plan_interrupt.threat_within", asked.threat_within, 1, settings.max_threat_distance, problems)
        if not backend.spec.threats:
            problems.append(f"plan_interrupt.threat_within: {backend.spec.name} names no threats (Describe's threats "
                            "is empty); use plan_interrupt.damage")
    if problems:
        raise InvalidArgument(join_problems(problems))
    return PlanInterrupt(damage=asked.damage, threat_within=asked.threat_within)


def build_session(settings: EnvServerSettings, skills: SkillRegistry, session_id: str,
                  request: env_pb2.CreateSessionRequest, *, record: bool = False) -> Session:
    """The session ``request`` asks for; ``record`` keeps trajectories even when the request does not."""
    s = settings
    problems: list[str] = []
    n = request.num_envs
    _check_range("num_envs", n, 1, s.max_envs_per_session, problems)
    if request.episode_length:
        _check_range("episode_length", request.episode_length, 1, s.max_episode_length, problems)
    if request.skill_max_steps:
        _check_range("skill_max_steps", request.skill_max_steps, 1, s.max_skill_steps, problems)
    if problems:
        raise InvalidArgument("; ".join(problems))
    backend = get_backend(request.backend)
    task = parse_task(request.task, backend.spec)
    stages = parse_stages(request.stages, backend.spec)
    terms = parse_reward_terms(list(request.reward_terms), backend.spec)
    actions = action_space(backend, list(request.primitive_actions), list(request.skills), skills)
    actions += plan_action(backend, list(request.plan), len(stages), skills)
    interrupt = plan_interrupt(backend, request, s)
    prefix = parse_prefix(backend, request.prefix, skills, s.max_episode_length)
    guards = parse_guards(backend, request.guards, skills, s.max_episode_length)
    return Session(session_id=session_id, backend=backend, task=task, reward_terms=terms, seed=request.seed,
                   observe=observe_mask(backend, list(request.observe)),
                   num_envs=n, episode_length=request.episode_length or backend.spec.default_episode_length,
                   actions=actions, skill_max_steps=request.skill_max_steps or s.default_skill_steps,
                   autoreset=request.autoreset, settings=s, record=record or request.record_trajectories,
                   client=request.client, stages=stages, plan_interrupt=interrupt, prefix=prefix,
                   animate=request.animate, guards=guards)
