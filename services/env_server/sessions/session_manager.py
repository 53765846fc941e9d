"""Open sessions by id: ids handed out within the server's limit, lookup, locking against a racing
close, and closing of idle sessions."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator

from rlgpt import metrics
from rlgpt.errors import InvalidArgument, ResourceExhausted, shown
from services.env_server.sessions.session import Session, session_not_found
from services.env_server.settings import EnvServerSettings

log = logging.getLogger(__name__)


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

    def __len__(self) -> int:
        """Sessions open or being created."""
        with self._lock:
            return len(self._sessions)

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
            raise session_not_found(session_id, self._settings)
        session.touch()
        return session

    @contextlib.contextmanager
    def using(self, session: Session) -> Iterator[Session]:
        """Holds the session's lock; NotFound when a close got the lock first."""
        with session.lock:
            if session.closed:
                raise session_not_found(session.id, self._settings)
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
