"""Sessions: N envs of one backend and task, stepped in batches, with coded skills as macro actions."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rlgpt import metrics
from rlgpt.config import EnvServerSettings
from rlgpt.errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, shown
from services.env_server.backends.base import Backend, BackendEnv, RawStep
from services.env_server.skills.executor import SkillExecutor, SkillRecord
from services.env_server.tasks import RewardTerm, Task, step_reward
from services.env_server.trajectory import TrajectoryRecorder
from services.env_server.trajectory_reading import watch_names

log = logging.getLogger(__name__)
SKILL_PREFIX = "skill:"


@dataclasses.dataclass
class Action:
    """One entry of a session's action space: a primitive (backend index) or a skill."""

    name: str
    primitive: int = -1
    skill: SkillRecord | None = None


@dataclasses.dataclass
class Episode:
    """Task bookkeeping of one env's current episode."""

    steps: int = 0
    episode_return: float = 0.0
    unlocked: list[str] = dataclasses.field(default_factory=list)
    success: bool = False
    inventory: dict[str, int] = dataclasses.field(default_factory=dict)
    health: float = 0.0
    end_reason: str = ""
    death_cause: str = ""
    error: dict[str, Any] | None = None
    trajectory: TrajectoryRecorder | None = None
    """Compact event log, kept only by recording sessions (RunSkill, evaluation)."""


@dataclasses.dataclass
class StepOutcome:
    """Per-env results of one batched step."""

    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    frames: np.ndarray
    infos: list[dict[str, Any]]


class EnvSlot:
    """One env of a session with its current observation and episode."""

    def __init__(self, env: BackendEnv):
        self.env = env
        self.image: np.ndarray | None = None
        self.vector: np.ndarray | None = None
        self.episode = Episode()
        self.episodes_started = 0
        self.needs_reset = False
        self._perception: dict[str, Any] | None = None

    def perception(self) -> dict[str, Any]:
        """What the player perceives now; computed once per frame (a recorded skill frame needs it twice)."""
        if self._perception is None:
            self._perception = self.env.perception()
        return self._perception

    def changed(self) -> None:
        """The env moved on (step, reset, items given): the next perception() reads it afresh."""
        self._perception = None


class Session:
    """N envs stepped together. Not thread-safe by itself: callers hold ``lock``."""

    def __init__(self, *, session_id: str, backend: Backend, task: Task, reward_terms: tuple[RewardTerm, ...],
                 seed: int, num_envs: int, episode_length: int, actions: list[Action], skill_max_steps: int,
                 autoreset: bool, settings: EnvServerSettings, record: bool = False, client: str = ""):
        self.id = session_id
        self.backend = backend
        self.task = task
        self.reward_terms = reward_terms
        self.seed = seed
        self.episode_length = episode_length
        self.actions = actions
        self.skill_max_steps = skill_max_steps
        self.autoreset = autoreset
        self.record = record
        self.client = client
        self.lock = threading.Lock()
        self.closed = False  # set under ``lock`` by close(); a call that waited for the lock checks it
        self.last_used = time.monotonic()
        self.total_frames = 0
        self._settings = settings
        self._action_index = {name: i for i, name in enumerate(backend.spec.actions)}
        self._executor: SkillExecutor | None = None
        # All stepping of a session happens on its own thread: envs keep their state on one thread (and
        # mostly one core) instead of hopping across gRPC pool threads (measured: make bench-env).
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"session-{session_id}")
        self.slots = [EnvSlot(backend.make_env()) for _ in range(num_envs)]
        for i in range(num_envs):
            self._reset_slot(i)

    def on_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Runs ``fn`` on the session's own thread and returns its result (exceptions propagate).

        A closed session raises NotFound, as if it had never been found: a close can race any call.
        """
        if self.closed:
            raise SessionManager.not_found(self.id, self._settings)
        try:
            future = self._thread.submit(fn, *args, **kwargs)
        except RuntimeError:  # "cannot schedule new futures after shutdown": a close got in first
            raise SessionManager.not_found(self.id, self._settings) from None
        return future.result()

    @property
    def num_envs(self) -> int:
        return len(self.slots)

    def touch(self) -> None:
        self.last_used = time.monotonic()

    # --- reset --------------------------------------------------------------------------------------
    def _reset_slot(self, i: int) -> None:
        slot = self.slots[i]
        episode_seed = self.seed + i + slot.episodes_started * self.num_envs
        slot.episodes_started += 1
        slot.image, slot.vector = slot.env.reset(episode_seed)
        slot.changed()
        if self.task.start_inventory:
            for item, count in self.task.start_inventory:
                slot.env.give(item, count)
            slot.image, slot.vector = slot.env.observe()
            slot.changed()
        slot.episode = Episode(inventory=slot.env.inventory(), health=slot.env.health(),
                               trajectory=self._recorder() if self.record else None)
        if slot.episode.trajectory is not None:
            slot.episode.trajectory.start(slot.perception(), slot.env.nearby_text())
        slot.needs_reset = False

    def reset(self, indices: list[int], seed: int = 0) -> list[int]:
        """Resets the listed envs (all when empty); a non-zero ``seed`` restarts the seed sequence."""
        if seed:
            self.seed = seed
            for slot in self.slots:
                slot.episodes_started = 0
        chosen = indices or list(range(self.num_envs))
        for i in chosen:
            self._reset_slot(i)
        return chosen

    def observations(self, indices: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return (np.stack([self.slots[i].image for i in indices]),
                np.stack([self.slots[i].vector for i in indices]))

    # --- step ---------------------------------------------------------------------------------------
    def step(self, actions: list[int], should_stop: Callable[[], bool] | None = None) -> StepOutcome:
        """Steps every env once: primitives take one frame, skills up to ``skill_max_steps``."""
        n = self.num_envs
        for i, slot in enumerate(self.slots):
            if slot.needs_reset:
                raise FailedPrecondition(f"env {i} of session {self.id} finished its episode and the session has "
                                         "no autoreset; call Reset for it first")
        out = StepOutcome(rewards=np.zeros(n, np.float32), terminated=np.zeros(n, bool),
                          truncated=np.zeros(n, bool), frames=np.zeros(n, np.int32),
                          infos=[{"achievements": []} for _ in range(n)])
        skill_envs: list[int] = []
        for i, action_id in enumerate(actions):
            action = self.actions[action_id]
            if action.skill is None:
                self._frame(i, action.primitive, action.name, out)
            else:
                skill_envs.append(i)
        if skill_envs:
            self._run_skills(skill_envs, actions, out, should_stop)
        for i, slot in enumerate(self.slots):
            info = out.infos[i]
            info["success"] = slot.episode.success
            info["episode_steps"] = slot.episode.steps
            info["episode_return"] = slot.episode.episode_return
            if out.terminated[i] or out.truncated[i]:
                info["end_reason"] = slot.episode.end_reason
                if self.record:
                    info["episode_summary"] = self.summary(i)
                metrics.ENV_EPISODES.labels(self.backend.spec.name, slot.episode.end_reason).inc()
                if self.autoreset:
                    self._reset_slot(i)
                    info["was_reset"] = True
                else:
                    slot.needs_reset = True
        frames = int(out.frames.sum())
        self.total_frames += frames
        metrics.ENV_STEPS.labels(self.backend.spec.name).inc(frames)
        return out

    def _frame(self, i: int, primitive: int, name: str, out: StepOutcome) -> bool:
        """One primitive frame of env ``i``; returns True when its episode ended."""
        slot = self.slots[i]
        episode = slot.episode
        raw: RawStep = slot.env.step(primitive)
        slot.changed()
        slot.image, slot.vector = raw.image, raw.vector
        inventory = slot.env.inventory()
        unlocked = slot.env.achievements()
        new = sorted(unlocked.difference(episode.unlocked))
        gained = {k: v - episode.inventory.get(k, 0) for k, v in inventory.items() if v > episode.inventory.get(k, 0)}
        health = slot.env.health()
        just_succeeded = not episode.success and self.task.holds(unlocked, inventory)
        reward = step_reward(self.reward_terms, native=raw.native_reward, newly_unlocked=set(new), gained=gained,
                             health_delta=health - episode.health, died=raw.dead, just_succeeded=just_succeeded)
        episode.steps += 1
        episode.episode_return += reward
        episode.unlocked.extend(new)
        episode.success = episode.success or just_succeeded
        if episode.trajectory is not None:
            self._record(slot, episode, name, new, gained, inventory)
        episode.inventory, episode.health = inventory, health
        out.rewards[i] += reward
        out.frames[i] += 1
        out.infos[i]["achievements"].extend(new)
        if raw.dead:
            episode.end_reason, episode.death_cause = "death", slot.env.death_cause()
            out.terminated[i] = True
        elif episode.success and self.task.terminate_on_success:
            episode.end_reason = "success"
            out.terminated[i] = True
        elif raw.backend_done:
            episode.end_reason = "backend_done"
            out.terminated[i] = True
        elif episode.steps >= self.episode_length:
            episode.end_reason = "time_limit"
            out.truncated[i] = True
        return bool(out.terminated[i] or out.truncated[i])

    def _recorder(self) -> TrajectoryRecorder:
        """A trajectory recorder that watches for what the task needs (from the world's rules)."""
        rules = self.backend.spec.rules() if self.backend.spec.rules is not None else None
        return TrajectoryRecorder(watch_names(rules, self.task.achievements, [item for item, _ in self.task.inventory]))

    @staticmethod
    def _record(slot: EnvSlot, episode: Episode, action: str, new: list[str], gained: dict[str, int],
                inventory: dict[str, int]) -> None:
        assert episode.trajectory is not None
        lost = {k: episode.inventory.get(k, 0) - v for k, v in inventory.items() if v < episode.inventory.get(k, 0)}
        episode.trajectory.frame(episode.steps, action, slot.perception(), gained, lost, new)

    def _executor_for_skills(self) -> SkillExecutor:
        if self._executor is None:
            self._executor = SkillExecutor(self._settings)
        return self._executor

    def _run_skills(self, envs: list[int], actions: list[int], out: StepOutcome,
                    should_stop: Callable[[], bool] | None) -> None:
        executor = self._executor_for_skills()
        names = list(self.backend.spec.actions)
        active: list[int] = []
        for i in envs:
            skill = self.actions[actions[i]].skill
            assert skill is not None
            out.infos[i]["skill"] = skill.name
            error = executor.start(i, skill, self.backend.spec.name, names)
            if error:
                self._skill_failed(i, error, skill, out)
            else:
                active.append(i)
        k = 0
        while active and k < self.skill_max_steps:
            if should_stop is not None and should_stop():
                break
            results = executor.advance({i: self.slots[i].perception() for i in active})
            still: list[int] = []
            for i in active:
                result = results.get(i, {"error": {"type": "WorkerCrashed", "message": "no result", "line": 0}})
                skill = self.actions[actions[i]].skill
                if "action" in result:
                    if not self._frame(i, self._action_index[result["action"]], result["action"], out):
                        still.append(i)
                elif "done" in result:
                    out.infos[i]["skill_finished"] = True
                    metrics.ENV_SKILL_RUNS.labels("finished").inc()
                    if out.frames[i] == 0:  # every action consumes a frame, so time always moves on
                        # Named for what happened: a policy without `noop` must not read as full of noops.
                        name = f"{SKILL_PREFIX}{skill.name if skill else '?'} (returned without acting)"
                        self._frame(i, self.backend.spec.noop_action, name, out)
                else:
                    self._skill_failed(i, result["error"], skill, out)
            active = still
            k += 1
        if active:
            outcome = "step_cap" if k >= self.skill_max_steps else "stopped"
            metrics.ENV_SKILL_RUNS.labels(outcome).inc(len(active))
        executor.stop(active)

    def _skill_failed(self, i: int, error: dict[str, Any], skill: SkillRecord | None, out: StepOutcome) -> None:
        if skill is not None and error.get("line") and not error.get("code_line"):
            lines = skill.code.splitlines()
            if 0 < error["line"] <= len(lines):
                error["code_line"] = lines[error["line"] - 1].strip()
        out.infos[i]["skill_error"] = error
        self.slots[i].episode.error = error
        metrics.ENV_SKILL_RUNS.labels("error").inc()
        metrics.ENV_SKILL_ERRORS.labels(error.get("type", "unknown")).inc()
        if out.frames[i] == 0:
            name = f"{SKILL_PREFIX}{skill.name if skill else '?'} (failed: {error.get('type', 'error')})"
            self._frame(i, self.backend.spec.noop_action, name, out)

    def summary(self, i: int) -> dict[str, Any]:
        """What env ``i``'s current episode did, for RunSkill and the critic."""
        slot = self.slots[i]
        episode = slot.episode
        reason = episode.end_reason or ("error" if episode.error else "skill_finished")
        if episode.success and reason in ("skill_finished", "time_limit"):
            reason = "success"
        closing = [f"end: {reason} at step {episode.steps}, near {slot.env.nearby_text()}"]
        if episode.death_cause:
            closing.append(f"death: {episode.death_cause}")
        if episode.error:
            closing.append(f"error: {episode.error['type']} line {episode.error.get('line', 0)}: "
                           f"{episode.error['message']}")
        text = episode.trajectory.text(closing) if episode.trajectory is not None else "\n".join(closing)
        return {
            "success": episode.success, "steps": episode.steps, "episode_return": episode.episode_return,
            "error": episode.error, "achievements": list(episode.unlocked), "death_cause": episode.death_cause,
            "text": text[:8000], "end_reason": reason,
            "final_inventory": {k: v for k, v in episode.inventory.items() if v},
        }

    def close(self) -> None:
        """Frees the envs; callers hold ``lock``. A second close does nothing."""
        if self.closed:
            return
        self.closed = True
        self._thread.shutdown(wait=False)
        if self._executor is not None:
            self._executor.close()
            self._executor = None
        for slot in self.slots:
            slot.env.close()


class SessionManager:
    """Open sessions by id, with limits and idle expiry."""

    ID_CHARS = 16
    """Length of the ids reserve() hands out; a longer id cannot name a session."""
    CLOSE_ALL_WAIT_SECONDS = 10.0
    """How long close_all waits for a call in progress on a session before closing it anyway."""

    def __init__(self, settings: EnvServerSettings):
        self._settings = settings
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, daemon=True, name="session-reaper")
        self._reaper.start()

    def reserve(self) -> str:
        """A new session id, or RESOURCE_EXHAUSTED when the server is full."""
        with self._lock:
            if len(self._sessions) >= self._settings.max_sessions:
                raise ResourceExhausted(f"the server has {len(self._sessions)} open sessions, its limit; close "
                                        f"sessions (CloseSession) or wait for idle ones to expire after "
                                        f"{self._settings.session_idle_seconds:.0f} s")
            session_id = uuid.uuid4().hex[:self.ID_CHARS]
            self._sessions[session_id] = None  # type: ignore[assignment]  # placeholder holds the slot
            return session_id

    def install(self, session: Session) -> None:
        with self._lock:
            self._sessions[session.id] = session
            metrics.ENV_SESSIONS_ACTIVE.set(len(self._sessions))

    def release(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)
            metrics.ENV_SESSIONS_ACTIVE.set(len(self._sessions))

    @staticmethod
    def not_found(session_id: str, settings: EnvServerSettings) -> NotFound:
        return NotFound(f"no session {shown(session_id)}: it was closed, expired after "
                        f"{settings.session_idle_seconds:.0f} s idle, or never existed; create one")

    @classmethod
    def check_id(cls, session_id: str) -> None:
        """INVALID_ARGUMENT for an id no session can have (empty, too long), before any lookup."""
        if not session_id:
            raise InvalidArgument("session_id is empty; CreateSession returns one")
        if len(session_id) > cls.ID_CHARS:
            raise InvalidArgument(f"session_id is {len(session_id)} chars; ids are {cls.ID_CHARS} "
                                  f"(CreateSession returns one): {shown(session_id)}")

    def get(self, session_id: str) -> Session:
        self.check_id(session_id)
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None or session.closed:
            raise self.not_found(session_id, self._settings)
        session.touch()
        return session

    @contextlib.contextmanager
    def using(self, session: Session) -> Iterator[Session]:
        """Holds the session's lock; NotFound when a close got the lock first."""
        with session.lock:
            if session.closed:
                raise self.not_found(session.id, self._settings)
            yield session

    def close(self, session_id: str) -> int:
        with self.using(self.get(session_id)) as session:
            self.release(session_id)
            session.close()
        return session.total_frames

    def _reap_loop(self) -> None:
        while not self._stop.wait(min(5.0, self._settings.session_idle_seconds / 4)):
            self.reap()

    def reap(self) -> list[str]:
        """Closes sessions idle longer than the limit (skipping any in use); returns their ids."""
        now = time.monotonic()
        with self._lock:
            idle = [s for s in self._sessions.values()
                    if s is not None and now - s.last_used > self._settings.session_idle_seconds]
        closed = []
        for session in idle:
            if session.lock.acquire(blocking=False):
                try:
                    if session.closed:  # a CloseSession got there first
                        continue
                    self.release(session.id)
                    session.close()
                    closed.append(session.id)
                    metrics.ENV_SESSIONS_EXPIRED.inc()
                    log.info("closed session %s after %.0f s idle", session.id, now - session.last_used)
                finally:
                    session.lock.release()
        return closed

    def shutdown(self) -> None:
        """Stops the reaper and closes every session."""
        self._stop.set()
        self.close_all()

    def close_all(self) -> None:
        with self._lock:
            sessions = [s for s in self._sessions.values() if s is not None]
            self._sessions.clear()
        for session in sessions:
            # Under the lock, so a call in progress finishes before its envs go away.
            locked = session.lock.acquire(timeout=self.CLOSE_ALL_WAIT_SECONDS)
            try:
                session.close()
            finally:
                if locked:
                    session.lock.release()
        metrics.ENV_SESSIONS_ACTIVE.set(0)
