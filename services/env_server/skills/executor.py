"""Server side of the sandbox: a killable worker process per user of skills, and the skill registry."""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rlgpt import metrics
from rlgpt.config import EnvServerSettings
from rlgpt.errors import AlreadyExists, InvalidArgument, NotFound, ResourceExhausted, shown
from services.env_server.skills.sandbox import SkillCheckError, check_source, compile_skill
from services.env_server.skills.worker import _HEADER, MAX_MESSAGE

log = logging.getLogger(__name__)
_PROJECT_ROOT = str(Path(__file__).resolve().parents[3])
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_SKILL_LINE = re.compile(r'File "<skill>", line (\d+)')


class WorkerFailure(Exception):
    """The worker died or was killed; ``kind`` is Timeout or WorkerCrashed, ``line`` best effort."""

    def __init__(self, kind: str, message: str, line: int = 0):
        super().__init__(message)
        self.kind = kind
        self.line = line


class SandboxProcess:
    """One worker process (``python -m services.env_server.skills.worker``) and its pipes."""

    def __init__(self, settings: EnvServerSettings):
        env = dict(os.environ)
        env["PYTHONPATH"] = _PROJECT_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "services.env_server.skills.worker", str(settings.skill_memory_mb),
             str(settings.skill_tick_budget)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=_PROJECT_ROOT,
            start_new_session=True)
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True, name="sandbox-stderr")
        self._stderr_thread.start()
        self.pid = self._proc.pid
        self.request({"op": "ping"}, settings.skill_worker_start_seconds)

    def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        for raw in self._proc.stderr:
            self._stderr.append(raw.decode(errors="replace").rstrip())

    def alive(self) -> bool:
        return self._proc.poll() is None

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Sends one message and waits for the reply; kills the worker and raises WorkerFailure past ``timeout``."""
        import json

        assert self._proc.stdin is not None and self._proc.stdout is not None
        payload = json.dumps(message, separators=(",", ":")).encode()
        try:
            self._proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self._crashed(f"cannot write to the sandbox worker: {exc}") from None
        deadline = time.monotonic() + timeout
        header = self._read_exact(_HEADER.size, deadline)
        (size,) = _HEADER.unpack(header)
        if size > MAX_MESSAGE:
            self.kill()
            raise WorkerFailure("WorkerCrashed", f"sandbox worker sent an oversized reply ({size} bytes)")
        return json.loads(self._read_exact(size, deadline))

    def _read_exact(self, size: int, deadline: float) -> bytes:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            wait = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, wait))
            if not ready:
                raise self._timed_out()
            chunk = os.read(fd, remaining)
            if not chunk:
                raise self._crashed("the sandbox worker exited")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _timed_out(self) -> WorkerFailure:
        # Ask faulthandler for the stack first: it names the skill line even inside a long C call.
        line = 0
        try:
            os.kill(self._proc.pid, signal.SIGUSR1)
            time.sleep(0.2)
            for text in reversed(self._stderr):
                match = _SKILL_LINE.search(text)
                if match:
                    line = int(match.group(1))
                    break
        except ProcessLookupError:
            pass
        self.kill()
        return WorkerFailure("Timeout", "the skill ran past its wall-clock limit without yielding; its sandbox "
                             "worker was killed and replaced", line)

    def _crashed(self, message: str) -> WorkerFailure:
        self.kill()
        tail = " | ".join(list(self._stderr)[-3:])
        return WorkerFailure("WorkerCrashed", f"{message}{': ' + tail if tail else ''}")

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.error("sandbox worker %d did not exit after SIGKILL", self._proc.pid)
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


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
            record = self._skills.get(name)
        if record is None:
            raise NotFound(f"no skill named {shown(name)}; register it first (RegisterSkill)")
        return record

    def delete(self, name: str) -> SkillRecord:
        """Removes a skill; sessions holding its record keep using it until they close."""
        with self._lock:
            record = self._skills.pop(name, None)
        if record is None:
            raise NotFound(f"no skill named {shown(name)}; ListSkills shows the registered ones")
        return record

    def all(self, backend: str = "") -> list[SkillRecord]:
        with self._lock:
            return sorted((r for r in self._skills.values() if not backend or r.backend == backend),
                          key=lambda r: r.name)

    def page(self, backend: str, after: str, size: int) -> tuple[list[SkillRecord], bool]:
        """Up to ``size`` skills named after ``after`` (name order), and whether more follow."""
        chosen = [r for r in self.all(backend) if r.name > after]
        return chosen[:size], len(chosen) > size


class SkillExecutor:
    """Runs skill generators of one user (a session, a RunSkill call) in its own sandbox worker.

    The worker is started lazily and replaced after it is killed; generators live only within one
    batched step, so a replacement loses nothing but the batch that caused it.
    """

    def __init__(self, settings: EnvServerSettings):
        self._settings = settings
        self._process: SandboxProcess | None = None
        self._loaded: set[str] = set()

    def _worker(self) -> SandboxProcess:
        if self._process is None or not self._process.alive():
            if self._process is not None:
                metrics.ENV_SKILL_WORKER_RESTARTS.inc()
            self._process = SandboxProcess(self._settings)
            self._loaded = set()
        return self._process

    def _call(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        worker = self._worker()
        try:
            return worker.request(message, timeout or self._settings.skill_call_seconds)
        except WorkerFailure:
            self._process = None
            self._loaded = set()
            metrics.ENV_SKILL_WORKER_RESTARTS.inc()
            raise

    def start(self, slot: int, skill: SkillRecord, backend: str, actions: list[str]) -> dict[str, Any] | None:
        """Starts the skill's generator in ``slot``; returns an error dict, or None on success."""
        try:
            if skill.key not in self._loaded:
                reply = self._call({"op": "load", "key": skill.key, "source": skill.code,
                                    "max_bytes": self._settings.max_code_bytes})
                if "error" in reply:
                    return reply["error"]
                self._loaded.add(skill.key)
            reply = self._call({"op": "start", "slot": slot, "key": skill.key, "backend": backend,
                                "actions": actions})
        except WorkerFailure as exc:
            return _failure_error(exc, skill.code)
        return reply.get("error")

    def advance(self, perceptions: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Resumes every listed slot once; slot -> {"action"} | {"done"} | {"error"}."""
        if not perceptions:
            return {}
        try:
            reply = self._call({"op": "advance", "items": [[s, p] for s, p in perceptions.items()]})
        except WorkerFailure as exc:
            return {slot: {"error": _failure_error(exc, "")} for slot in perceptions}
        return {int(slot): result for slot, result in reply["results"]}

    def stop(self, slots: list[int]) -> None:
        if slots and self._process is not None and self._process.alive():
            try:
                self._call({"op": "stop", "slots": slots})
            except WorkerFailure:
                pass

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None


def _failure_error(exc: WorkerFailure, source: str) -> dict[str, Any]:
    lines = source.splitlines()
    code_line = lines[exc.line - 1].strip() if source and 0 < exc.line <= len(lines) else ""
    return {"type": exc.kind, "message": str(exc), "line": exc.line, "code_line": code_line}
