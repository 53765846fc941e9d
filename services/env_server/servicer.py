"""``rlgpt.v1.EnvService``: validation at the edge, then sessions, skills and the sandbox."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc

from rlgpt import metrics
from rlgpt.config import EnvServerSettings
from rlgpt.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    grpc_errors,
    join_problems,
    shown,
)
from rlgpt.tensors import to_tensor
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc
from rlgpt.validation import Problems
from services.env_server.backends.base import Backend, BackendSpec, backend_names, backend_spec, get_backend
from services.env_server.session import SKILL_PREFIX, Action, Session, SessionManager, StepOutcome
from services.env_server.skill_doc import skill_api_text
from services.env_server.skills.executor import SkillExecutor, SkillRegistry
from services.env_server.tasks import REWARD_KINDS, parse_reward_terms, parse_task

log = logging.getLogger(__name__)
SERVICE_NAME = env_pb2.DESCRIPTOR.services_by_name["EnvService"].full_name
LIST_PAGE_DEFAULT = 50
"""ListSkills page size when the request sets none (documented in env.proto)."""
LIST_PAGE_MAX = 200
"""Largest ListSkills page; larger page_size values are treated as this."""
PAGE_TOKEN_MAX_CHARS = 1024
"""Tokens this server issues are far shorter; a longer one is refused before decoding."""


def skill_error_proto(error: dict[str, Any] | None) -> common_pb2.SkillError | None:
    if not error:
        return None
    return common_pb2.SkillError(type=str(error.get("type", "")), message=str(error.get("message", "")),
                                 line=int(error.get("line", 0) or 0), code_line=str(error.get("code_line", "")))


def episode_summary_proto(e: dict[str, Any]) -> common_pb2.EpisodeSummary:
    return common_pb2.EpisodeSummary(
        success=e["success"], steps=e["steps"], episode_return=e["episode_return"], error=skill_error_proto(e["error"]),
        achievements=e["achievements"], death_cause=e["death_cause"], text=e["text"], end_reason=e["end_reason"],
        final_inventory=[common_pb2.ItemCount(item=k, count=v) for k, v in e["final_inventory"].items()])


def observation_fields(spec: BackendSpec) -> list[env_pb2.ObservationField]:
    return [
        env_pb2.ObservationField(name="image", dtype="uint8", shape=list(spec.image_shape),
                                 description="RGB frame, height x width x channel"),
        env_pb2.ObservationField(name="vector", dtype="float32", shape=[len(spec.vector_labels)],
                                 description="status, inventory and extra values, named in labels",
                                 labels=list(spec.vector_labels)),
    ]


class EnvServicer(env_pb2_grpc.EnvServiceServicer):
    """Serves sessions of Crafter/MineDojo envs with coded skills in the action space."""

    def __init__(self, settings: EnvServerSettings):
        self.settings = settings
        self.sessions = SessionManager(settings)
        self.skills = SkillRegistry(settings)
        self._probe_lock = threading.Lock()
        self._probe_executor: SkillExecutor | None = None
        self._probe_envs: dict[str, Any] = {}
        # RunSkill sessions are private but still cost envs: they share the session limit's budget.
        self._run_skill_slots = threading.BoundedSemaphore(max(1, settings.max_sessions // 2))

    def close(self) -> None:
        self.sessions.shutdown()
        with self._probe_lock:
            if self._probe_executor is not None:
                self._probe_executor.close()

    def _limits(self) -> env_pb2.ServerLimits:
        s = self.settings
        return env_pb2.ServerLimits(
            max_envs_per_session=s.max_envs_per_session, max_sessions=s.max_sessions,
            max_code_bytes=s.max_code_bytes, max_skill_steps=s.max_skill_steps,
            max_run_skill_episodes=s.max_run_skill_episodes, max_episode_length=s.max_episode_length,
            session_idle_seconds=s.session_idle_seconds, max_skills=s.max_skills)

    # --- edge checks: sizes of every string and repeated field, before any work ----------------------
    def _check_task(self, p: Problems, field: str, task: common_pb2.TaskSpec) -> None:
        s = self.settings
        p.chars(f"{field}.name", task.name, s.max_name_chars)
        p.chars(f"{field}.description", task.description, s.max_text_chars)
        if p.entries(f"{field}.success", task.success, s.max_list_entries):
            for i, cond in enumerate(task.success):
                p.chars(f"{field}.success[{i}].achievement", cond.achievement, s.max_name_chars)
                p.chars(f"{field}.success[{i}].inventory.item", cond.inventory.item, s.max_name_chars)
        if p.entries(f"{field}.start_inventory", task.start_inventory, s.max_list_entries):
            for i, item_count in enumerate(task.start_inventory):
                p.chars(f"{field}.start_inventory[{i}].item", item_count.item, s.max_name_chars)

    def _check_reward_terms(self, p: Problems, terms: Any) -> None:
        s = self.settings
        if p.entries("reward_terms", terms, s.max_list_entries):
            for i, term in enumerate(terms):
                p.chars(f"reward_terms[{i}].kind", term.kind, s.max_name_chars)
                p.chars(f"reward_terms[{i}].target", term.target, s.max_name_chars)

    def _check_create_request(self, request: env_pb2.CreateSessionRequest) -> None:
        s = self.settings
        p = Problems()
        p.chars("backend", request.backend, s.max_name_chars)
        p.chars("client", request.client, s.max_name_chars)
        self._check_task(p, "task", request.task)
        self._check_reward_terms(p, request.reward_terms)
        p.names("primitive_actions", list(request.primitive_actions), s.max_list_entries, s.max_name_chars)
        p.names("skills", list(request.skills), s.max_list_entries, s.max_name_chars)
        p.raise_if_any()

    # --- Describe -----------------------------------------------------------------------------------
    @grpc_errors
    def Describe(self, request: env_pb2.DescribeRequest, context: grpc.ServicerContext) -> env_pb2.DescribeResponse:
        p = Problems()
        p.chars("backend", request.backend, self.settings.max_name_chars)
        p.raise_if_any()
        spec, reason = backend_spec(request.backend)
        if spec is None:
            return env_pb2.DescribeResponse(backend=request.backend, available=False, unavailable_reason=reason,
                                            limits=self._limits())
        rules = spec.rules() if spec.rules is not None and not reason else None
        return env_pb2.DescribeResponse(
            backend=spec.name, actions=list(spec.actions), observation=observation_fields(spec),
            achievements=list(spec.achievements), items=list(spec.items), reward_kinds=list(REWARD_KINDS),
            skill_api=skill_api_text(spec, rules), limits=self._limits(), available=not reason,
            unavailable_reason=reason, rules=rules)

    # --- sessions -----------------------------------------------------------------------------------
    def _check_range(self, field: str, value: int, low: int, high: int, problems: list[str]) -> None:
        if not low <= value <= high:
            problems.append(f"{field}={value} must be in {low}..{high}")

    def _action_space(self, backend: Backend, primitives: list[str], skill_names: list[str]) -> list[Action]:
        spec = backend.spec
        problems: list[str] = []
        actions: list[Action] = []
        for name in primitives or spec.actions:
            if name not in spec.actions:
                problems.append(f"unknown primitive action {shown(name)} for {spec.name}; "
                                f"known: {', '.join(spec.actions)}")
            else:
                actions.append(Action(name=name, primitive=spec.actions.index(name)))
        if len(set(primitives)) != len(primitives):
            problems.append("primitive_actions has duplicates")
        if len(set(skill_names)) != len(skill_names):
            problems.append("skills has duplicates")
        if problems:
            raise InvalidArgument(join_problems(problems))
        for name in skill_names:
            record = self.skills.get(name)  # NotFound names the missing skill
            if record.backend != spec.name:
                raise InvalidArgument(f"skill {shown(name)} was written for {record.backend}, not {spec.name}")
            actions.append(Action(name=SKILL_PREFIX + name, skill=record))
        return actions

    def _build_session(self, session_id: str, request: env_pb2.CreateSessionRequest, *, record: bool = False,
                       num_envs: int | None = None) -> Session:
        s = self.settings
        problems: list[str] = []
        n = request.num_envs if num_envs is None else num_envs
        self._check_range("num_envs", n, 1, s.max_envs_per_session, problems)
        if request.episode_length:
            self._check_range("episode_length", request.episode_length, 1, s.max_episode_length, problems)
        if request.skill_max_steps:
            self._check_range("skill_max_steps", request.skill_max_steps, 1, s.max_skill_steps, problems)
        if problems:
            raise InvalidArgument("; ".join(problems))
        backend = get_backend(request.backend)
        task = parse_task(request.task, backend.spec)
        terms = parse_reward_terms(list(request.reward_terms), backend.spec)
        actions = self._action_space(backend, list(request.primitive_actions), list(request.skills))
        return Session(session_id=session_id, backend=backend, task=task, reward_terms=terms, seed=request.seed,
                       num_envs=n, episode_length=request.episode_length or backend.spec.default_episode_length,
                       actions=actions, skill_max_steps=request.skill_max_steps or s.default_skill_steps,
                       autoreset=request.autoreset, settings=s, record=record or request.record_trajectories,
                       client=request.client)

    @staticmethod
    def _observations(session: Session, indices: list[int]) -> env_pb2.Observations:
        images, vectors = session.observations(indices)
        return env_pb2.Observations(image=to_tensor(images), vector=to_tensor(vectors), env_indices=indices)

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
        p = Problems()
        p.entries("env_indices", request.env_indices, self.settings.max_envs_per_session)
        p.raise_if_any()
        session = self.sessions.get(request.session_id)
        with self.sessions.using(session):
            if len(request.env_indices) > session.num_envs:
                raise InvalidArgument(f"env_indices has {len(request.env_indices)} entries; session {session.id} "
                                      f"has {session.num_envs} envs")
            bad = [i for i in request.env_indices if not 0 <= i < session.num_envs]
            if bad:
                raise InvalidArgument(f"env_indices {shown(bad)} out of range 0..{session.num_envs - 1}")
            indices = session.reset(list(request.env_indices), request.seed)
            return env_pb2.ResetResponse(observations=self._observations(session, indices))

    def _step(self, request: env_pb2.StepRequest, context: grpc.ServicerContext) -> env_pb2.StepResponse:
        session = self.sessions.get(request.session_id)
        actions = list(request.actions)
        if len(actions) != session.num_envs:
            raise InvalidArgument(f"actions has {len(actions)} entries; session {session.id} has "
                                  f"{session.num_envs} envs (one action per env)")
        n_actions = len(session.actions)
        bad = sorted({a for a in actions if not 0 <= a < n_actions})
        if bad:
            raise InvalidArgument(f"action ids {bad[:10]} out of range: the action space has {n_actions} actions "
                                  f"(0..{n_actions - 1})")
        start = time.perf_counter()
        with self.sessions.using(session):  # NotFound when a CloseSession got in between
            outcome = session.on_thread(session.step, actions, should_stop=lambda: not context.is_active())
            response = self._step_response(session, outcome)
        metrics.ENV_STEP_SECONDS.labels(session.backend.spec.name).observe(time.perf_counter() - start)
        return response

    def _step_response(self, session: Session, out: StepOutcome) -> env_pb2.StepResponse:
        infos = []
        for info in out.infos:
            infos.append(env_pb2.StepInfo(
                achievements=info["achievements"], success=info["success"], episode_steps=info["episode_steps"],
                episode_return=info["episode_return"], skill_error=skill_error_proto(info.get("skill_error")),
                end_reason=info.get("end_reason", ""), skill_finished=info.get("skill_finished", False),
                was_reset=info.get("was_reset", False), skill=info.get("skill", ""),
                episode=episode_summary_proto(info["episode_summary"]) if "episode_summary" in info else None))
        return env_pb2.StepResponse(
            observations=self._observations(session, list(range(session.num_envs))),
            rewards=out.rewards.tolist(), terminated=out.terminated.tolist(), truncated=out.truncated.tolist(),
            frames=out.frames.tolist(), infos=infos)

    @grpc_errors
    def Step(self, request: env_pb2.StepRequest, context: grpc.ServicerContext) -> env_pb2.StepResponse:
        return self._step(request, context)

    @grpc_errors
    def StreamSteps(self, request_iterator: Iterator[env_pb2.StepRequest],
                    context: grpc.ServicerContext) -> Iterator[env_pb2.StepResponse]:
        for request in request_iterator:
            yield self._step(request, context)

    @grpc_errors
    def CloseSession(self, request: env_pb2.CloseSessionRequest,
                     context: grpc.ServicerContext) -> env_pb2.CloseSessionResponse:
        return env_pb2.CloseSessionResponse(total_frames=self.sessions.close(request.session_id))

    # --- skills -------------------------------------------------------------------------------------
    def _smoke_test(self, name: str, code: str, backend: Backend) -> None:
        """Runs the candidate for a few hundred frames on a few test worlds (skills/probe.py): code errors,
        NoYield and timeouts are refused before the skill is registered."""
        from services.env_server.skills.probe import probe_skill

        with self._probe_lock:
            probe_skill(self.settings, name, code, backend, self._probe_envs)

    @grpc_errors
    def RegisterSkill(self, request: env_pb2.RegisterSkillRequest,
                      context: grpc.ServicerContext) -> env_pb2.RegisterSkillResponse:
        p = Problems()
        p.chars("name", request.name, self.settings.max_name_chars)
        p.chars("description", request.description, self.settings.max_text_chars)
        p.chars("backend", request.backend, self.settings.max_name_chars)
        p.raise_if_any()
        backend_name = request.backend or "crafter"
        if backend_name not in backend_names():
            raise InvalidArgument(f"unknown backend {shown(backend_name)}; known: {', '.join(backend_names())}")
        self.skills.check(request.name, request.code)
        if not request.replace:
            try:
                existing = self.skills.get(request.name)
            except NotFound:
                existing = None
            if existing is not None:
                self.skills.put(request.name, request.description, request.code, backend_name, False)  # raises
        self._smoke_test(request.name, request.code, get_backend(backend_name))
        record = self.skills.put(request.name, request.description, request.code, backend_name, request.replace)
        log.info("registered skill %s v%d (%d bytes)", record.name, record.version, len(record.code))
        return env_pb2.RegisterSkillResponse(skill=env_pb2.SkillInfo(
            name=record.name, description=record.description, backend=record.backend, code=record.code,
            version=record.version))

    @staticmethod
    def _page_token(backend: str, after: str) -> str:
        return base64.urlsafe_b64encode(json.dumps([backend, after]).encode()).decode()

    @staticmethod
    def _after_name(backend: str, token: str) -> str:
        """The last name of the previous page, from a token; INVALID_ARGUMENT for one not issued here."""
        if not token:
            return ""
        bad = ("page_token is not a next_page_token of this server; pass the previous answer's token "
               "unchanged, or none to start over")
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
        except (binascii.Error, ValueError, UnicodeError):
            raise InvalidArgument(bad) from None
        if not (isinstance(decoded, list) and len(decoded) == 2 and all(isinstance(x, str) for x in decoded)
                and decoded[1]):
            raise InvalidArgument(bad)
        if decoded[0] != backend:
            raise InvalidArgument(f"page_token belongs to a listing of backend {shown(decoded[0])}, not "
                                  f"{shown(backend)}; keep the backend filter while paging")
        return decoded[1]

    @grpc_errors
    def ListSkills(self, request: env_pb2.ListSkillsRequest,
                   context: grpc.ServicerContext) -> env_pb2.ListSkillsResponse:
        p = Problems()
        p.chars("backend", request.backend, self.settings.max_name_chars)
        p.chars("page_token", request.page_token, PAGE_TOKEN_MAX_CHARS)
        if request.page_size < 0:
            p.add(f"page_size={request.page_size} must be >= 0 (0 means {LIST_PAGE_DEFAULT})")
        p.raise_if_any()
        size = min(request.page_size or LIST_PAGE_DEFAULT, LIST_PAGE_MAX)
        records, more = self.skills.page(request.backend, self._after_name(request.backend, request.page_token), size)
        return env_pb2.ListSkillsResponse(
            skills=[env_pb2.SkillInfo(name=r.name, description=r.description, backend=r.backend,
                                      code=r.code if request.include_code else "", version=r.version)
                    for r in records],
            next_page_token=self._page_token(request.backend, records[-1].name) if more else "")

    @grpc_errors
    def DeleteSkill(self, request: env_pb2.DeleteSkillRequest,
                    context: grpc.ServicerContext) -> env_pb2.DeleteSkillResponse:
        p = Problems()
        p.chars("name", request.name, self.settings.max_name_chars)
        p.raise_if_any()
        # Sessions created with the skill keep their SkillRecord: they step it until they close.
        record = self.skills.delete(request.name)
        log.info("deleted skill %s v%d", record.name, record.version)
        return env_pb2.DeleteSkillResponse(skill=env_pb2.SkillInfo(
            name=record.name, description=record.description, backend=record.backend, code=record.code,
            version=record.version))

    @grpc_errors
    def RunSkill(self, request: env_pb2.RunSkillRequest, context: grpc.ServicerContext) -> env_pb2.RunSkillResponse:
        s = self.settings
        p = Problems()
        p.chars("skill", request.skill, s.max_name_chars)
        p.chars("backend", request.backend, s.max_name_chars)
        self._check_task(p, "task", request.task)
        self._check_reward_terms(p, request.reward_terms)
        p.in_range("episodes", request.episodes, 1, s.max_run_skill_episodes)
        if request.max_steps:
            p.in_range("max_steps", request.max_steps, 1, s.max_episode_length)
        p.raise_if_any()
        record = self.skills.get(request.skill)
        max_steps = request.max_steps or s.run_skill_default_steps
        session_request = env_pb2.CreateSessionRequest(
            backend=request.backend or record.backend, task=request.task, seed=request.seed,
            num_envs=request.episodes, reward_terms=request.reward_terms, episode_length=max_steps,
            skills=[record.name], autoreset=False)
        if not self._run_skill_slots.acquire(timeout=30):
            raise FailedPrecondition("too many RunSkill calls in progress; retry shortly")
        try:
            session = self._build_session("runskill", session_request, record=True)
            session.skill_max_steps = max_steps  # a test episode is one skill action of up to max_steps frames
            try:
                skill_action = len(session.actions) - 1
                session.step([skill_action] * session.num_envs, should_stop=lambda: not context.is_active())
                summaries = [session.summary(i) for i in range(session.num_envs)]
            finally:
                session.close()
        finally:
            self._run_skill_slots.release()
        episodes = [episode_summary_proto(e) for e in summaries]
        success_rate = sum(e["success"] for e in summaries) / len(summaries)
        return env_pb2.RunSkillResponse(episodes=episodes, success_rate=success_rate,
                                        mean_steps=sum(e["steps"] for e in summaries) / len(summaries))
