"""``rlgpt.v1.EnvService``, the RPC edge: every request's sizes are checked before it runs (by the server, against
the env server's request limits, services/env_server/limits.py), its ranges here before any work; then it is handed
to what does the work (describe.py, session_builder.py and session_manager.py, skill_catalog.py, skill_trials.py),
and the answers built as messages (messages.py); errors become gRPC statuses (rlgpt.errors)."""

from __future__ import annotations

import collections
import functools
import logging
import time
from collections.abc import Iterable, Iterator

import grpc

from rlgpt import metrics
from rlgpt.errors import FailedPrecondition, InvalidArgument, grpc_errors, shown
from rlgpt.tensors import to_tensor
from rlgpt.v1 import env_pb2, env_pb2_grpc
from rlgpt.validation import Problems
from services.env_server.backends.base import backend_spec
from services.env_server.describe import describe, observation_fields
from services.env_server.limits import env_limits
from services.env_server.messages import episode_summary_proto, skill_error_proto, skill_info
from services.env_server.sessions.outcome import StepOutcome
from services.env_server.sessions.session import Session
from services.env_server.sessions.session_builder import build_session
from services.env_server.sessions.session_manager import SessionManager
from services.env_server.sessions.skill_trials import SkillTrials
from services.env_server.settings import EnvServerSettings
from services.env_server.skill_catalog import SkillCatalog
from services.env_server.skills.executor import SkillRegistry
from services.env_server.tasks import resolve_task

log = logging.getLogger(__name__)
SERVICE_NAME = env_pb2.DESCRIPTOR.services_by_name["EnvService"].full_name
LIST_PAGE_DEFAULT = 50
"""ListSkills page size when the request sets none (documented in env.proto)."""
LIST_PAGE_MAX = 200
"""Largest ListSkills page; larger page_size values are treated as this."""


class EnvServicer(env_pb2_grpc.EnvServiceServicer):
    """Serves sessions of Crafter/MineDojo envs with coded skills in the action space."""

    def __init__(self, settings: EnvServerSettings):
        self.settings = settings
        self.sessions = SessionManager(settings)
        self.skills = SkillRegistry(settings)
        self.catalog = SkillCatalog(settings, self.skills)
        self.trials = SkillTrials(settings, self.skills)
        self.request_limits = env_limits(settings)
        self.max_streams = settings.max_streams
        """Streams served at once (create_server sizes the thread pool and refuses one more by it)."""

    def close(self) -> None:
        self.sessions.shutdown()

    # --- edge checks: what the values mean (their sizes are checked before a call runs) -------------------
    def _check_create_request(self, request: env_pb2.CreateSessionRequest) -> None:
        s = self.settings
        p = Problems()
        p.in_range("animate", request.animate, 0, s.max_animations)
        if request.animate and not request.record_trajectories:
            p.add(f"animate={request.animate} needs record_trajectories: animations come with the episode summaries "
                  "a recording session returns")
        p.raise_if_any()

    # --- Describe -----------------------------------------------------------------------------------
    @grpc_errors
    def Describe(self, request: env_pb2.DescribeRequest, context: grpc.ServicerContext) -> env_pb2.DescribeResponse:
        return describe(request.backend, self.settings)

    @grpc_errors
    def ResolveTask(self, request: env_pb2.ResolveTaskRequest,
                    context: grpc.ServicerContext) -> env_pb2.ResolveTaskResponse:
        spec, _ = backend_spec(request.backend)  # the vocabulary is known even where the backend cannot run
        if spec is None:
            raise FailedPrecondition(f"backend {shown(request.backend)} has no vocabulary on this server")
        return env_pb2.ResolveTaskResponse(task=resolve_task(request.task, spec))

    # --- sessions -----------------------------------------------------------------------------------
    def _build_session(self, session_id: str, request: env_pb2.CreateSessionRequest) -> Session:
        """A session for ``request`` under ``session_id`` (benchmarks/bench_env.py builds its sessions here)."""
        return build_session(self.settings, self.skills, session_id, request)

    @staticmethod
    def _observations(session: Session, indices: list[int]) -> env_pb2.Observations:
        images, vectors = session.observations(indices)
        return env_pb2.Observations(image=to_tensor(images), vector=to_tensor(vectors), env_indices=indices,
                                    prefix_frames=session.prefix_frames(indices))

    @grpc_errors
    def CreateSession(self, request: env_pb2.CreateSessionRequest,
                      context: grpc.ServicerContext) -> env_pb2.CreateSessionResponse:
        self._check_create_request(request)
        session_id = self.sessions.reserve()
        try:
            session = self._build_session(session_id, request)
        except BaseException:
            self.sessions.release(session_id)
            raise
        self.sessions.install(session)
        log.info("session %s: %s x%d task=%s actions=%d client=%s", session.id, session.backend.spec.name,
                 session.num_envs, session.task.name, len(session.actions), request.client or "-")
        return env_pb2.CreateSessionResponse(
            session_id=session.id, actions=[a.name for a in session.actions],
            observation=observation_fields(session.backend.spec), num_envs=session.num_envs,
            observations=self._observations(session, list(range(session.num_envs))),
            skill_max_steps=session.skill_max_steps, episode_length=session.episode_length)

    @grpc_errors
    def Reset(self, request: env_pb2.ResetRequest, context: grpc.ServicerContext) -> env_pb2.ResetResponse:
        session = self.sessions.get(request.session_id)
        with self.sessions.using(session):
            indices = session.reset(self._env_indices(session, request.env_indices, "reset"), request.seed)
            return env_pb2.ResetResponse(observations=self._observations(session, indices))

    def _step(self, request: env_pb2.StepRequest, context: grpc.ServicerContext,
              own_thread: bool = False) -> env_pb2.StepResponse:
        """One Step. ``own_thread``: the caller's thread serves only this stream (StreamSteps), so the session is
        stepped right here; a unary call hops to the session's own thread, keeping its envs on one thread."""
        session = self.sessions.get(request.session_id)
        actions = list(request.actions)
        indices = self._env_indices(session, request.env_indices, "stepped") or None  # None: all of them
        expected = session.num_envs if indices is None else len(indices)
        if len(actions) != expected:
            raise InvalidArgument(
                f"actions has {len(actions)} entries; session {session.id} has {session.num_envs} envs (one action "
                "per env)" if indices is None else
                f"actions has {len(actions)} entries and env_indices {len(indices)}: one action per listed env")
        n_actions = len(session.actions)
        bad = sorted({a for a in actions if not 0 <= a < n_actions})
        if bad:
            raise InvalidArgument(f"action ids {bad[:10]} out of range: the action space has {n_actions} actions "
                                  f"(0..{n_actions - 1})")
        start = time.perf_counter()
        with self.sessions.using(session):  # NotFound when a CloseSession got in between
            step = session.step if own_thread else functools.partial(session.on_thread, session.step)
            outcome = step(actions, should_stop=lambda: not context.is_active(), indices=indices)
            response = self._step_response(session, outcome, indices)
        metrics.ENV_STEP_SECONDS.labels(session.backend.spec.name).observe(time.perf_counter() - start)
        return response

    @staticmethod
    def _env_indices(session: Session, env_indices: Iterable[int], done: str) -> list[int]:
        """The envs a Step or a Reset names (empty: all of them); InvalidArgument for indices out of range or
        repeated (``done``: what the call does to each env, for the message)."""
        indices = list(env_indices)
        bad = [i for i in indices if not 0 <= i < session.num_envs]
        if bad:
            raise InvalidArgument(f"env_indices {shown(bad[:10])} out of range 0..{session.num_envs - 1}")
        repeated = sorted(i for i, n in collections.Counter(indices).items() if n > 1)
        if repeated:
            raise InvalidArgument(f"env_indices repeats {shown(repeated[:10])}: each env is {done} at most once "
                                  "per call")
        return indices

    def _step_response(self, session: Session, out: StepOutcome,
                       indices: list[int] | None = None) -> env_pb2.StepResponse:
        infos = []
        for info in out.infos:
            infos.append(env_pb2.StepInfo(
                achievements=info["achievements"], success=info["success"], episode_steps=info["episode_steps"],
                episode_return=info["episode_return"], skill_error=skill_error_proto(info.get("skill_error")),
                plan_error=skill_error_proto(info.get("plan_error")),
                end_reason=info.get("end_reason", ""), skill_finished=info.get("skill_finished", False),
                plan_interrupted=info.get("plan_interrupted", ""),
                was_reset=info.get("was_reset", False), skill=info.get("skill", ""), stages_done=info["stages_done"],
                episode=episode_summary_proto(info["episode_summary"]) if "episode_summary" in info else None))
        return env_pb2.StepResponse(
            observations=self._observations(session, list(range(session.num_envs)) if indices is None else indices),
            rewards=out.rewards.tolist(), terminated=out.terminated.tolist(), truncated=out.truncated.tolist(),
            frames=out.frames.tolist(), infos=infos)

    @grpc_errors
    def Step(self, request: env_pb2.StepRequest, context: grpc.ServicerContext) -> env_pb2.StepResponse:
        return self._step(request, context)

    @grpc_errors
    def StreamSteps(self, request_iterator: Iterator[env_pb2.StepRequest],
                    context: grpc.ServicerContext) -> Iterator[env_pb2.StepResponse]:
        for request in request_iterator:
            yield self._step(request, context, own_thread=True)

    @grpc_errors
    def CloseSession(self, request: env_pb2.CloseSessionRequest,
                     context: grpc.ServicerContext) -> env_pb2.CloseSessionResponse:
        return env_pb2.CloseSessionResponse(total_frames=self.sessions.close(request.session_id))

    # --- skills -------------------------------------------------------------------------------------
    @grpc_errors
    def RegisterSkill(self, request: env_pb2.RegisterSkillRequest,
                      context: grpc.ServicerContext) -> env_pb2.RegisterSkillResponse:
        record = self.catalog.register(request.name, request.description, request.code, request.backend,
                                       request.replace)
        return env_pb2.RegisterSkillResponse(skill=skill_info(record))

    @grpc_errors
    def ListSkills(self, request: env_pb2.ListSkillsRequest,
                   context: grpc.ServicerContext) -> env_pb2.ListSkillsResponse:
        if request.page_size < 0:
            raise InvalidArgument(f"page_size={request.page_size} must be >= 0 (0 means {LIST_PAGE_DEFAULT})")
        size = min(request.page_size or LIST_PAGE_DEFAULT, LIST_PAGE_MAX)
        records, token = self.catalog.page(request.backend, request.page_token, size)
        return env_pb2.ListSkillsResponse(skills=[skill_info(r, request.include_code) for r in records],
                                          next_page_token=token)

    @grpc_errors
    def DeleteSkill(self, request: env_pb2.DeleteSkillRequest,
                    context: grpc.ServicerContext) -> env_pb2.DeleteSkillResponse:
        return env_pb2.DeleteSkillResponse(skill=skill_info(self.catalog.delete(request.name)))

    @grpc_errors
    def RunSkill(self, request: env_pb2.RunSkillRequest, context: grpc.ServicerContext) -> env_pb2.RunSkillResponse:
        s = self.settings
        p = Problems()
        if request.skill and request.plan:
            p.add("set skill (one skill's test) or plan (a chain of skills), not both")
        p.in_range("episodes", request.episodes, 1, s.max_run_skill_episodes)
        if request.max_steps:
            p.in_range("max_steps", request.max_steps, 1, s.max_episode_length)
        p.in_range("frames_per_episode", request.frames_per_episode, 0, s.max_frames_per_episode)
        p.in_range("animate", request.animate, 0, s.max_animations)
        p.raise_if_any()
        trials = self.trials.run(request, should_stop=lambda: not context.is_active())
        summaries = [t.summary for t in trials]
        frames = [env_pb2.EpisodeFrames(png=t.frames, steps=t.frame_steps) for t in trials]
        return env_pb2.RunSkillResponse(
            episodes=[episode_summary_proto(e) for e in summaries],
            success_rate=sum(e["success"] for e in summaries) / len(summaries),
            mean_steps=sum(e["steps"] for e in summaries) / len(summaries),
            frames=frames if request.frames_per_episode else [])
