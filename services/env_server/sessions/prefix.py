"""A session's prefix (CreateSessionRequest.prefix): the earlier links of a chain, run by the env server after
every reset before the client's first observation, so that a later link trains and is evaluated where the chain
hands over.

Each step's skill runs as a skill action through macro_actions.run_skills (the one path that runs skills), started
again whenever it returns, until the step's conditions hold (judged as the task's are, after every frame) or its
max_frames pass; a skill error ends the step (it is logged). A death resets the env to its next world and the
prefix runs again, at most ``MAX_TRIES`` times; after the last the client gets the last try's world afresh. The
prefix's frames are the session's (``Session.frame`` with the episode ``in_prefix``: no reward, no task or stage
judged, no time limit) and count in the episode's steps, not toward its length."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from rlgpt.env_contract import SKILL_PREFIX
from rlgpt.errors import InvalidArgument, join_problems
from rlgpt.v1 import common_pb2
from services.env_server.backends.base import Backend
from services.env_server.sessions.actions import Action
from services.env_server.sessions.macro_actions import MacroSession, PlanInterrupt, PlanState, run_skills
from services.env_server.sessions.outcome import StepOutcome
from services.env_server.skills.executor import SkillExecutor, SkillRecord, SkillRegistry
from services.env_server.tasks import Task, parse_stages

log = logging.getLogger(__name__)

MAX_TRIES = 3
"""Tries of a prefix whose player dies (each in a new world) before the client gets the last try's world."""


@dataclasses.dataclass(frozen=True)
class PrefixStep:
    """One validated step: its skill, the conditions that end it (judged as a task's) and its frame budget."""

    skill: SkillRecord
    success: Task
    max_frames: int


def parse_prefix(backend: Backend, steps: Sequence[common_pb2.PrefixStep], skills: SkillRegistry,
                 max_episode_length: int) -> tuple[PrefixStep, ...]:
    """The request's prefix checked: conditions in the backend's vocabulary and not empty, max_frames in
    1..``max_episode_length`` (InvalidArgument lists every problem), then each skill registered for the backend
    (NotFound names a missing one)."""
    problems: list[str] = []
    for j, step in enumerate(steps):
        if not step.success:
            problems.append(f"prefix[{j}].success is empty: a prefix step needs the conditions that say its link is "
                            "done (its sub-task's success conditions)")
        if not 1 <= step.max_frames <= max_episode_length:
            problems.append(f"prefix[{j}].max_frames={step.max_frames} must be in 1..{max_episode_length} (the most "
                            "env frames the step may take)")
    try:
        conditions = parse_stages(steps, backend.spec, field="prefix")
    except InvalidArgument as e:
        problems.append(str(e))
    if problems:
        raise InvalidArgument(join_problems(problems))
    parsed = []
    for j, (step, success) in enumerate(zip(steps, conditions, strict=True)):
        record = skills.for_backend(step.skill, backend.spec.name, f"prefix[{j}]")
        parsed.append(PrefixStep(skill=record, success=success, max_frames=step.max_frames))
    return tuple(parsed)


class PrefixSession(MacroSession, Protocol):
    """What a prefix uses of a session (``Session`` is one): its steps, and a new episode in a world."""

    prefix: tuple[PrefixStep, ...]
    id: str

    def new_episode(self, i: int, seed: int | None = None) -> None:
        """Resets env ``i`` to its next world (or ``seed``'s again), its episode in the prefix."""
        ...


@dataclasses.dataclass
class _EnvPrefix:
    """Where one env's prefix stands."""

    step: int = 0
    step_frames: int = 0
    """Frames the current step has taken."""
    frames: int = 0
    """Frames of every try so far."""
    tries: int = 1
    done: bool = False


class _PrefixRun:
    """The session as run_skills sees it while prefixes run (a MacroSession): one skill action per step, and
    frames that also end the skill once its env's step is over."""

    def __init__(self, session: PrefixSession, states: dict[int, _EnvPrefix]):
        self.session = session
        self.states = states
        self.backend = session.backend
        self.slots = session.slots
        self.primitive_index = session.primitive_index
        self.plan_skill_overtime = session.plan_skill_overtime
        self.plan_interrupt = PlanInterrupt()
        self.plans: dict[int, PlanState] = {}
        self.actions = [Action(name=SKILL_PREFIX + step.skill.name, skill=step.skill) for step in session.prefix]
        self.skill_max_steps = 1

    @property
    def num_envs(self) -> int:
        return self.session.num_envs

    def frame(self, i: int, primitive: int, name: str, out: StepOutcome) -> bool:
        ended = self.session.frame(i, primitive, name, out)
        self.states[i].step_frames += 1
        return ended or self.step_over(i)

    def step_over(self, i: int) -> bool:
        """Whether env ``i``'s current step is over: its conditions hold or its frames are spent."""
        state = self.states[i]
        step = self.session.prefix[state.step]
        episode = self.slots[i].episode
        return state.step_frames >= step.max_frames or step.success.holds(set(episode.unlocked), episode.inventory)

    def next_step(self, i: int, start: int) -> None:
        """Env ``i`` goes on with step ``start``, passing the steps whose conditions hold already."""
        state = self.states[i]
        state.step, state.step_frames = start, 0
        episode = self.slots[i].episode
        while state.step < len(self.session.prefix) and self.session.prefix[state.step].success.holds(
                set(episode.unlocked), episode.inventory):
            state.step += 1
        state.done = state.step >= len(self.session.prefix)

    def retry(self, i: int) -> None:
        """Env ``i``'s player died (or its episode ended) in the prefix: a new world and the prefix again, or,
        after the last try, the last try's world afresh for the client."""
        state = self.states[i]
        episode = self.slots[i].episode
        log.info("session %s env %d: the prefix's try %d/%d ended by %s%s at step %d of the prefix", self.session.id,
                 i, state.tries, MAX_TRIES, episode.end_reason, f" ({episode.death_cause})" * bool(episode.death_cause),
                 state.step)
        if state.tries >= MAX_TRIES:
            self.session.new_episode(i, seed=self.slots[i].seed)
            state.done = True
            return
        state.tries += 1
        self.session.new_episode(i)
        self.next_step(i, 0)


def run_prefix(session: PrefixSession, executor: SkillExecutor, envs: list[int],
               should_stop: Callable[[], bool] | None = None) -> dict[int, int]:
    """Runs the session's prefix in the listed envs (just reset), together, one frame of each per round; returns
    the frames it took per env (all tries)."""
    states = {i: _EnvPrefix() for i in envs}
    run = _PrefixRun(session, states)
    for i in envs:
        run.next_step(i, 0)
    live = [i for i in envs if not states[i].done]
    while live and not (should_stop is not None and should_stop()):
        out = StepOutcome.empty(session.num_envs)
        actions = [0] * session.num_envs
        for i in live:
            actions[i] = states[i].step
        # Each env's own budget ends its skill through frame(); K only has to reach the largest.
        run.skill_max_steps = max(session.prefix[states[i].step].max_frames - states[i].step_frames for i in live)
        run_skills(run, executor, live, actions, out, should_stop)
        for i in live:
            state = states[i]
            state.frames += int(out.frames[i])
            if out.terminated[i]:
                run.retry(i)
            elif error := out.infos[i].get("skill_error"):
                log.info("session %s env %d: prefix step %d's skill %s failed, the step ends: %s line %s: %s",
                         session.id, i, state.step, session.prefix[state.step].skill.name, error.get("type"),
                         error.get("line", 0), error.get("message", ""))
                run.next_step(i, state.step + 1)
            elif run.step_over(i):
                run.next_step(i, state.step + 1)
            # else the skill returned before its conditions held: it starts again in the next round
        live = [i for i in live if not states[i].done]
    return {i: state.frames for i, state in states.items()}
