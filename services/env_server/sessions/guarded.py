"""Guards (CreateSessionRequest.guards): skills that take over from whatever skill an env runs when their
trigger holds, and hand back when they return.

:class:`GuardedExecutor` is the session's SkillExecutor with guards, so every path that runs skills (skill
actions, plan actions, the prefix, RunSkill's tests) is guarded by this one mechanism without knowing it.
Before each round it checks the asked envs' guards against each env's observation vector; a guard that fires
starts its skill in a sandbox slot of its own, and the env's rounds go to it while the interrupted skill's
generator waits in its slot, locals and all. When the guard's skill returns, fails or spends its max_frames, the
same round goes on with the waiting skill (or with whatever skill the env's slot runs by then: a plan that moved
on, a new skill action). A guard fires when its trigger holds, no guard runs and it is ready: a take-over makes it
not ready, and it is ready again once its trigger stops holding (so one that cannot meet its need does not take
every frame, and a trigger that started while another guard ran still fires after it); each new episode makes
every guard ready. A guard's error is the guard's, not the interrupted skill's: it is logged, counted and
written in the episode's trajectory, and the interrupted skill goes on."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlgpt import metrics
from rlgpt.errors import InvalidArgument, join_problems, shown
from rlgpt.v1 import common_pb2
from services.env_server.backends.base import Backend
from services.env_server.sessions.episode import EnvSlot, Episode
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillExecutor, SkillRecord, SkillRegistry, error_words, with_code_line

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Trigger:
    """One entry of a guard's trigger: the vector entry ``index`` (``label``) below ``value`` (or above it)."""

    index: int
    label: str
    value: float
    above: bool = False

    def reason(self, vector: np.ndarray) -> str:
        """"status/drink 2 < 3" while it holds for ``vector``, else ""."""
        entry = float(vector[self.index])
        if entry > self.value if self.above else entry < self.value:
            return f"{self.label} {entry:g} {'>' if self.above else '<'} {self.value:g}"
        return ""


@dataclasses.dataclass(frozen=True)
class Guard:
    """One validated guard: its skill, what fires it and how long one take-over may run."""

    skill: SkillRecord
    when: tuple[Trigger, ...]
    max_frames: int

    def reason(self, vector: np.ndarray) -> str:
        """Why the guard's trigger holds for ``vector`` ("status/drink 2 < 3"), or "" when it does not."""
        return next((why for t in self.when if (why := t.reason(vector))), "")


def parse_guards(backend: Backend, guards: Sequence[common_pb2.Guard], skills: SkillRegistry,
                 max_episode_length: int) -> tuple[Guard, ...]:
    """The request's guards checked: each trigger a vector label of the backend with a finite value, max_frames in
    1..``max_episode_length`` (InvalidArgument lists every problem), then each skill registered for the backend
    (NotFound names a missing one)."""
    labels = list(backend.spec.vector_labels)
    problems: list[str] = []
    for j, guard in enumerate(guards):
        if not guard.when:
            problems.append(f"guards[{j}].when is empty: say when the guard takes over (a vector label below a "
                            "value, e.g. status/drink below 3, or above it)")
        for k, threshold in enumerate(guard.when):
            if threshold.label not in labels:
                problems.append(f"guards[{j}].when[{k}].label {shown(threshold.label)} is not a vector label of "
                                f"{backend.spec.name}: use one that Describe's vector field lists, e.g. "
                                f"{', '.join(labels[:3])}")
            if not math.isfinite(threshold.value):
                problems.append(f"guards[{j}].when[{k}].value must be a finite number")
        if not 1 <= guard.max_frames <= max_episode_length:
            problems.append(f"guards[{j}].max_frames={guard.max_frames} must be in 1..{max_episode_length} (the most "
                            "env frames one take-over may run)")
    if problems:
        raise InvalidArgument(join_problems(problems))
    parsed = []
    for j, guard in enumerate(guards):
        record = skills.for_backend(guard.skill, backend.spec.name, f"guards[{j}]")
        when = tuple(Trigger(labels.index(t.label), t.label, float(t.value), t.above) for t in guard.when)
        parsed.append(Guard(skill=record, when=when, max_frames=guard.max_frames))
    return tuple(parsed)


@dataclasses.dataclass
class _EnvGuards:
    """Where one env's guards stand in its episode."""

    episode: Episode
    """The episode this state is of: another one means a new episode, every guard ready again."""
    ready: list[bool]
    """Per guard, whether its trigger's next start fires it."""
    active: int | None = None
    """The guard running now, by index."""
    frames: int = 0
    """Frames the running guard has taken."""


class GuardedExecutor(SkillExecutor):
    """A session's SkillExecutor with guards: a skill slot's rounds go to the env's guard while one runs.

    Slots map to envs as the session lays them out (skill actions in ``i``, plan skills in ``n + i``); a guard
    runs in slot ``2n + i``."""

    def __init__(self, settings: EnvServerSettings, guards: tuple[Guard, ...], slots: list[EnvSlot]):
        super().__init__(settings)
        self.guards = guards
        self._slots = slots
        self._states: dict[int, _EnvGuards] = {}
        self._started: dict[int, tuple[str, list[str]]] = {}  # env -> the backend and actions its skills run with

    def guard_slot(self, env: int) -> int:
        return 2 * len(self._slots) + env

    def start(self, slot: int, skill: SkillRecord, backend: str, actions: list[str],
              remembered: dict[str, Any] | None = None) -> dict[str, Any] | None:
        self._started[slot % len(self._slots)] = (backend, actions)
        return super().start(slot, skill, backend, actions, remembered)

    def advance(self, perceptions: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Each listed slot's next action, from its env's guard while one runs. A guard that hands back in this
        round leaves it to the next ready guard whose trigger holds, else to the waiting skill: each guard takes over
        at most once a round (a take-over makes it not ready), so the round ends."""
        n = len(self._slots)
        answered: dict[int, dict[str, Any]] = {}
        pending = perceptions
        while pending:
            asked: dict[int, dict[str, Any]] = {}
            for slot, perception in pending.items():
                env = slot % n
                state = self._state(env)
                if state.active is None:
                    self._fire(env, state)
                asked[self.guard_slot(env) if state.active is not None else slot] = perception
            results = super().advance(asked)
            handed_back: dict[int, dict[str, Any]] = {}
            for slot, perception in pending.items():
                env = slot % n
                state = self._states[env]
                if state.active is None:
                    answered[slot] = results[slot]
                elif "action" in (result := results[self.guard_slot(env)]):
                    answered[slot] = result
                    state.frames += 1
                    if state.frames >= self.guards[state.active].max_frames:
                        self._end(env, state, "max_frames", f"spent its {state.frames} frames")
                else:
                    if "done" in result:
                        self._end(env, state, "returned", f"returned after {state.frames} frames")
                    else:
                        error = with_code_line(dict(result.get("error", {})), self.guards[state.active].skill.code)
                        self._end(env, state, "error", f"failed after {state.frames} frames: {error_words(error)}")
                    handed_back[slot] = perception  # the same round goes on: another guard or the waiting skill
            pending = handed_back
        return answered

    def _state(self, env: int) -> _EnvGuards:
        """Env ``env``'s guards, ready again when its episode is a new one (a running guard is stopped)."""
        episode = self._slots[env].episode
        state = self._states.get(env)
        if state is None or state.episode is not episode:
            if state is not None and state.active is not None:
                super().stop([self.guard_slot(env)])
            state = self._states[env] = _EnvGuards(episode=episode, ready=[True] * len(self.guards))
        return state

    def _fire(self, env: int, state: _EnvGuards) -> None:
        """Starts the first ready guard whose trigger holds now; makes ready each whose trigger does not."""
        slot = self._slots[env]
        for g, guard in enumerate(self.guards):
            reason = guard.reason(slot.vector)
            if not reason:
                state.ready[g] = True
            elif state.ready[g] and state.active is None:
                state.ready[g] = False
                backend, actions = self._started[env]
                error = super().start(self.guard_slot(env), guard.skill, backend, actions, slot.env.remembered())
                if error:
                    self._note(env, "error", f"guard {guard.skill.name} could not start ({reason}): "
                                             f"{error.get('type', 'error')}: {error.get('message', '')}")
                    continue
                state.active, state.frames = g, 0
                self._note(env, "", f"guard {guard.skill.name} takes over ({reason})")

    def _end(self, env: int, state: _EnvGuards, outcome: str, how: str) -> None:
        assert state.active is not None
        guard = self.guards[state.active]
        state.active = None
        super().stop([self.guard_slot(env)])
        self._note(env, outcome, f"guard {guard.skill.name} {how}, hands back")

    def _note(self, env: int, outcome: str, text: str) -> None:
        """Counts a guard's take-over's end (``outcome``; "" for a start) and writes ``text`` in the episode's
        trajectory."""
        if outcome:
            metrics.ENV_GUARD_RUNS.labels(outcome).inc()
        episode = self._slots[env].episode
        if episode.trajectory is not None:
            episode.trajectory.note(episode.steps, text)
        log.debug("env %d step %d: %s", env, episode.steps, text)
