"""Describe's answer: what a backend offers (actions and what each does, observation fields and their scale,
achievements, items, the stack limit, reward kinds, the skill API text, the world's rules and the game's name) and
the server's limits."""

from __future__ import annotations

from rlgpt.v1 import env_pb2
from services.env_server.backends.base import BackendSpec, backend_spec
from services.env_server.limits import env_limits
from services.env_server.settings import EnvServerSettings
from services.env_server.skill_doc import skill_api_text
from services.env_server.tasks import REWARD_KINDS

IMAGE_SCALE = 255.0
"""What a network divides the 8-bit image by."""


def observation_fields(spec: BackendSpec) -> list[env_pb2.ObservationField]:
    return [
        env_pb2.ObservationField(name="image", dtype="uint8", shape=list(spec.image_shape),
                                 description="RGB frame, height x width x channel", scale=IMAGE_SCALE),
        env_pb2.ObservationField(name="vector", dtype="float32", shape=[len(spec.vector_labels)],
                                 description=spec.vector_description,
                                 labels=list(spec.vector_labels), scale=spec.vector_scale),
    ]


def action_roles(spec: BackendSpec) -> env_pb2.ActionRoles:
    return env_pb2.ActionRoles(move=list(spec.move_actions), idle=spec.idle_action, interact=spec.interact_action)


def server_limits(s: EnvServerSettings) -> env_pb2.ServerLimits:
    return env_pb2.ServerLimits(
        max_envs_per_session=s.max_envs_per_session, max_sessions=s.max_sessions,
        max_code_bytes=s.max_code_bytes, max_skill_steps=s.max_skill_steps,
        max_run_skill_episodes=s.max_run_skill_episodes, max_episode_length=s.max_episode_length,
        session_idle_seconds=s.session_idle_seconds, max_skills=s.max_skills,
        max_frames_per_episode=s.max_frames_per_episode, max_stages=s.max_list_entries,
        max_threat_distance=s.max_threat_distance, default_skill_steps=s.default_skill_steps,
        max_animation_frames=s.max_animation_frames, max_animations=s.max_animations,
        requests=env_limits(s).to_proto(), max_streams=s.max_streams)


def describe(backend: str, settings: EnvServerSettings) -> env_pb2.DescribeResponse:
    """The answer for ``backend`` (the default one when empty); an unavailable backend says why."""
    spec, reason = backend_spec(backend)
    if spec is None:
        return env_pb2.DescribeResponse(backend=backend, available=False, unavailable_reason=reason,
                                        limits=server_limits(settings))
    rules = spec.rules() if spec.rules is not None and not reason else None
    return env_pb2.DescribeResponse(
        backend=spec.name, actions=list(spec.actions), observation=observation_fields(spec),
        achievements=list(spec.achievements), items=list(spec.items), reward_kinds=list(REWARD_KINDS),
        skill_api=skill_api_text(spec, rules), limits=server_limits(settings), available=not reason,
        unavailable_reason=reason, rules=rules, threats=list(spec.threats), display_name=spec.display_name,
        action_roles=action_roles(spec), stack_limit=spec.stack_limit)
