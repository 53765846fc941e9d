"""Server side of the sandbox: the skill registry, and the executor that runs one user's skills in a worker.

Worker processes themselves (start, requests, loss, memory budget) are :mod:`.pool`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import threading
from typing import Any

from rlgpt import metrics
from rlgpt.errors import AlreadyExists, InvalidArgument, NotFound, ResourceExhausted, found, shown
from services.env_server.backends.base import get_backend
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.compiler import compile_skill
from services.env_server.skills.pool import IDLE, SandboxBusy, SandboxProcess, WorkerFailure, budget_for
from services.env_server.skills.recipes import compact_rules
from services.env_server.skills.sandbox import SkillCheckError, check_source

__all__ = ["SandboxBusy", "SandboxProcess", "SkillExecutor", "SkillRecord", "SkillRegistry", "WorkerFailure"]

log = logging.getLogger(__name__)
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclasses.dataclass(frozen=True)
class SkillRecord:
    """A registered skill; ``key`` names this exact version inside workers."""

    name: str
    description: str
    code: str
    backend: str
    version: int

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"


class SkillRegistry:
    """Registered skills by name, shared by every session of the server."""

    def __init__(self, settings: EnvServerSettings):
        self._settings = settings
        self._skills: dict[str, SkillRecord] = {}
        # Last version per name, kept across DeleteSkill: a re-registered skill never reuses a version,
        # so its key cannot match code a sandbox worker loaded for the deleted one.
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()

    def check(self, name: str, code: str) -> str:
        """Validates name and code statically; returns the entry function name or raises InvalidArgument."""
        if not _NAME.match(name):
            raise InvalidArgument(f"skill name {shown(name)} must match [a-z][a-z0-9_]{{0,63}}")
        size = len(code.encode("utf-8", errors="replace"))
        if size > self._settings.max_code_bytes:
            raise InvalidArgument(f"skill {name!r}: code is {size} bytes; the limit is "
                                  f"{self._settings.max_code_bytes} bytes")
        try:
            checked = check_source(code, self._settings.max_code_bytes)
            compile_skill(checked)
        except SkillCheckError as exc:
            raise InvalidArgument(f"skill {name!r} rejected: {exc}") from None
        return checked.entry

    def put(self, name: str, description: str, code: str, backend: str, replace: bool) -> SkillRecord:
        with self._lock:
            old = self._skills.get(name)
            if old is not None and not replace:
                raise AlreadyExists(f"skill {name!r} exists (version {old.version}); set replace=true to update it")
            if old is None and len(self._skills) >= self._settings.max_skills:
                raise ResourceExhausted(f"the server holds {len(self._skills)} skills, its limit; remove skills "
                                        "(DeleteSkill), replace them (replace=true), or raise "
                                        "RLGPT_ENV_MAX_SKILLS")
            version = self._versions.get(name, 0) + 1
            record = SkillRecord(name, description, code, backend, version)
            self._skills[name] = record
            self._versions[name] = version
            return record

    def get(self, name: str) -> SkillRecord:
        with self._lock:
            return found(self._skills.get(name), f"no skill named {shown(name)}; register it first (RegisterSkill)")

    def for_backend(self, name: str, backend: str, where: str = "") -> SkillRecord:
        """The skill ``name`` a request names (``where``: the field, e.g. "plan[2]"), written for ``backend``:
        NotFound names a missing one, InvalidArgument one of another backend."""
        try:
            record = self.get(name)
        except NotFound as e:
            raise NotFound(f"{where}.skill: {e}" if where else str(e)) from None
        if record.backend != backend:
            raise InvalidArgument(f"{where + ': ' if where else ''}skill {shown(name)} was written for "
                                  f"{record.backend}, not {backend}")
        return record

    def delete(self, name: str) -> SkillRecord:
        """Removes a skill; sessions holding its record keep using it until they close."""
        with self._lock:
            return found(self._skills.pop(name, None),
                         f"no skill named {shown(name)}; ListSkills shows the registered ones")

    def all(self, backend: str = "") -> list[SkillRecord]:
        with self._lock:
            return sorted((r for r in self._skills.values() if not backend or r.backend == backend),
                          key=lambda r: r.name)

    def page(self, backend: str, after: str, size: int) -> tuple[list[SkillRecord], bool]:
        """Up to ``size`` skills named after ``after`` (name order), and whether more follow."""
        chosen = [r for r in self.all(backend) if r.name > after]
        return chosen[:size], len(chosen) > size


@functools.cache
def agent_rules(backend: str) -> dict[str, Any] | None:
    """The world's rules of ``backend`` as the agent's recipe helpers read them (None where there are none)."""
    spec = get_backend(backend).spec
    return compact_rules(spec.rules()) if spec.rules is not None else None


class SkillExecutor:
    """Runs skill generators of one user (a session, a RunSkill call) in its own sandbox worker.

    The worker is started lazily (reserving its memory in the server's budget) and replaced after it
    is lost; generators live only within one batched step, so a replacement loses nothing but the
    batch that was running. When a worker is lost, the slot it was running gets the cause (Timeout,
    WorkerCrashed, with the skill line) and the other slots of the batch get ``Interrupted``.
    Thread-safe: the budget may stop this executor's idle worker from another thread.
    """

    def __init__(self, settings: EnvServerSettings):
        self._settings = settings
        self._budget = budget_for(settings)
        self._lock = threading.RLock()
        self._process: SandboxProcess | None = None
        self._loaded: set[str] = set()
        self._running: dict[int, str] = {}  # slot -> source of the skill whose generator lives in the worker
        self._lost: dict[int, dict[str, Any]] = {}  # slot -> error, for generators lost with their worker

    def release_if_idle(self) -> bool:
        """Stops the worker when no generator lives in it (called by the memory budget); True when stopped."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._running or self._process is None:
                return False
            log.info("stopping idle sandbox worker %d to make room in the memory budget", self._process.pid)
            self._drop_process(kill=True)
            return True
        finally:
            self._lock.release()

    def _drop_process(self, kill: bool = False) -> None:
        if kill and self._process is not None:
            self._process.kill()
        self._process = None
        self._loaded = set()

    def _notice_dead_worker(self) -> None:
        """A worker that died since the last request (killed from outside): its generators are lost."""
        if self._process is not None and not self._process.alive():
            failure = self._process.crashed("the sandbox worker died between steps")
            log.warning("sandbox worker %d: %s", self._process.pid, failure)
            metrics.ENV_SKILL_WORKER_RESTARTS.inc()
            self._drop_process()
            self._lose_running(failure)

    def _lose_running(self, failure: WorkerFailure) -> None:
        for slot, source in self._running.items():
            if failure.slot in (slot, IDLE):
                self._lost[slot] = _failure_error(failure, source)
            else:
                self._lost[slot] = _interrupted(failure)
        self._running.clear()

    def _worker(self) -> SandboxProcess:
        self._notice_dead_worker()
        if self._process is None:
            lease = self._budget.reserve(self, self._settings.skill_memory_mb)  # raises SandboxBusy
            try:
                self._process = SandboxProcess(self._settings, lease)
            except BaseException:
                lease.release()
                raise
            self._loaded = set()
        return self._process

    def _call(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        worker = self._worker()
        try:
            return worker.request(message, timeout or self._settings.skill_call_seconds)
        except WorkerFailure as failure:
            self._drop_process()
            metrics.ENV_SKILL_WORKER_RESTARTS.inc()
            self._lose_running(failure)
            raise

    def start(self, slot: int, skill: SkillRecord, backend: str, actions: list[str],
              remembered: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Starts the skill's generator in ``slot`` (``remembered``: the map its episode showed so far, which its
        agent starts with); returns an error dict, or None on success."""
        with self._lock:
            self._lost.pop(slot, None)
            try:
                if skill.key not in self._loaded:
                    reply = self._call({"op": "load", "key": skill.key, "source": skill.code,
                                        "max_bytes": self._settings.max_code_bytes})
                    if "error" in reply:
                        return reply["error"]
                    self._loaded.add(skill.key)
                message: dict[str, Any] = {"op": "start", "slot": slot, "key": skill.key, "backend": backend,
                                           "actions": actions}
                if remembered is not None:
                    message["remembered"] = remembered
                rules_key = f"rules:{backend}"  # the world's rules go to each worker once per backend
                if rules_key not in self._loaded:
                    message["rules"] = agent_rules(backend)
                reply = self._call(message)
                self._loaded.add(rules_key)
            except WorkerFailure as exc:
                return _failure_error(exc, skill.code)
            if "error" in reply:
                return reply["error"]
            self._running[slot] = skill.code
            return None

    def advance(self, perceptions: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Resumes every listed slot once; slot -> {"action"} | {"done"} | {"error"}."""
        with self._lock:
            if not perceptions:
                return {}
            self._notice_dead_worker()
            results = {slot: {"error": self._lost.pop(slot)} for slot in perceptions if slot in self._lost}
            asked = [slot for slot in perceptions if slot not in results]
            if not asked:
                return results
            try:
                reply = self._call({"op": "advance", "items": [[s, perceptions[s]] for s in asked]})
                answered = {int(slot): result for slot, result in reply["results"]}
            except WorkerFailure as exc:
                for slot in asked:
                    results[slot] = {"error": self._lost.pop(slot, None) or _failure_error(exc, "")}
                return results
            except (KeyError, TypeError, ValueError):
                failure = self._process.crashed("the sandbox worker sent a malformed reply") if self._process \
                    else WorkerFailure("WorkerCrashed", "the sandbox worker sent a malformed reply")
                self._drop_process()
                self._lose_running(failure)
                return {**results, **{slot: {"error": _failure_error(failure, "")} for slot in asked}}
            for slot in asked:
                result = answered.get(slot)
                if not isinstance(result, dict):
                    result = {"error": {"type": "WorkerCrashed", "message": "the sandbox worker gave no result",
                                        "line": 0, "code_line": ""}}
                if "action" not in result:
                    self._running.pop(slot, None)
                results[slot] = result
            return results

    def stop(self, slots: list[int]) -> None:
        with self._lock:
            for slot in slots:
                self._running.pop(slot, None)
                self._lost.pop(slot, None)
            if slots and self._process is not None and self._process.alive():
                try:
                    self._call({"op": "stop", "slots": slots})
                except WorkerFailure:
                    pass

    # Read without the lock (one reference read): they must answer while a request is in flight.
    @property
    def isolation(self) -> dict[str, Any]:
        """What OS isolation the current worker reported (empty before one has started)."""
        process = self._process
        return dict(process.isolation) if process is not None else {}

    @property
    def worker_pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def close(self) -> None:
        with self._lock:
            self._drop_process(kill=True)
            self._running.clear()
            self._lost.clear()


def with_code_line(error: dict[str, Any], code: str) -> dict[str, Any]:
    """``error`` with the line of ``code`` its ``line`` names, where it lacks one (filled in place, and returned)."""
    if code and error.get("line") and not error.get("code_line"):
        lines = code.splitlines()
        if 0 < error["line"] <= len(lines):
            error["code_line"] = lines[error["line"] - 1].strip()
    return error


def error_words(error: dict[str, Any]) -> str:
    """A skill error in one line, as a trajectory and a refusal show it:
    "ValueError at line 4: no water [raise ValueError(...)]"."""
    line, code_line = error.get("line") or 0, error.get("code_line") or ""
    return (f"{error.get('type') or 'error'}{f' at line {line}' if line else ''}: {error.get('message', '')}"
            f"{f' [{code_line}]' if code_line else ''}")


def _failure_error(exc: WorkerFailure, source: str) -> dict[str, Any]:
    lines = source.splitlines()
    code_line = lines[exc.line - 1].strip() if source and 0 < exc.line <= len(lines) else ""
    return {"type": exc.kind, "message": str(exc), "line": exc.line, "code_line": code_line}


def _interrupted(culprit: WorkerFailure) -> dict[str, Any]:
    what = "ran past its time limit" if culprit.kind == "Timeout" else "crashed its sandbox worker"
    return {"type": "Interrupted", "message": f"stopped because another skill in the same batch (env {culprit.slot}) "
            f"{what}; nothing is wrong with this skill, run it again", "line": 0, "code_line": ""}
