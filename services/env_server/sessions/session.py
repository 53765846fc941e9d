"""Sessions: N envs of one backend and task stepped together in batches (primitives one frame each, skill
and plan actions through macro_actions.py, which gets the session as its ``MacroSession``), with rewards,
episode ends and resets (each followed by the session's prefix, prefix.py) and the episodes' animations
(animation.py)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rlgpt import metrics
from rlgpt.errors import FailedPrecondition, NotFound, shown
from services.env_server.backends.base import Backend, RawStep
from services.env_server.sessions.actions import Action
from services.env_server.sessions.animation import AnimationQuota
from services.env_server.sessions.episode import EnvSlot, Episode
from services.env_server.sessions.guarded import Guard, GuardedExecutor
from services.env_server.sessions.macro_actions import PlanInterrupt, PlanState, plan_slot, run_skills
from services.env_server.sessions.outcome import StepOutcome
from services.env_server.sessions.prefix import PrefixStep, run_prefix
from services.env_server.sessions.recording import episode_summary, record_frame, recorder_for
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillExecutor
from services.env_server.tasks import RewardTerm, Task, step_reward


def session_not_found(session_id: str, settings: EnvServerSettings) -> NotFound:
    return NotFound(f"no session {shown(session_id)}: it was closed, expired after "
                    f"{settings.session_idle_seconds:.0f} s idle, or never existed; create one")


class Session:
    """N envs stepped together. Not thread-safe by itself: callers hold ``lock``."""

    def __init__(self, *, session_id: str, backend: Backend, task: Task, reward_terms: tuple[RewardTerm, ...],
                 seed: int, num_envs: int, episode_length: int, actions: list[Action], skill_max_steps: int,
                 autoreset: bool, settings: EnvServerSettings, record: bool = False, client: str = "",
                 stages: tuple[Task, ...] = (), observe: np.ndarray | None = None,
                 plan_interrupt: PlanInterrupt | None = None, prefix: tuple[PrefixStep, ...] = (),
                 animate: int = 0, guards: tuple[Guard, ...] = ()):
        self.id = session_id
        self.observe = observe
        """Per vector entry 1 (observed) or 0 (left at 0 for the policy); None: all observed."""
        self.backend = backend
        self.task = task
        self.stages = stages
        """Extra condition sets judged like the task's on every frame (StepInfo.stages_done)."""
        self.reward_terms = reward_terms
        self.seed = seed
        self.episode_length = episode_length
        self.actions = actions
        self.skill_max_steps = skill_max_steps
        self.plan_interrupt = plan_interrupt or PlanInterrupt()
        """When a plan action ends before its K frames (macro_actions.run_skills)."""
        self.autoreset = autoreset
        self.guards = guards
        """Skills that take over from the session's skills while their trigger holds (guarded.py)."""
        self.prefix = prefix
        """What runs after every reset before the client's first observation (prefix.py)."""
        self.animations = AnimationQuota(animate, settings.max_animation_frames) if animate else None
        """Which ended episodes get an animation; None: none do."""
        self.record = record
        self.client = client
        self.lock = threading.Lock()
        self.closed = False  # set under ``lock`` by close(); a call that waited for the lock checks it
        self.last_used = time.monotonic()
        self.total_frames = 0
        self.on_frame: Callable[[int], None] | None = None
        """Called with env ``i`` after each of its frames (its slot holds the new observation); RunSkill
        samples frames through it."""
        self._settings = settings
        self.plan_skill_overtime = settings.plan_skill_overtime
        """Frames a plan skill may go on after its stage is done (EnvServerSettings.plan_skill_overtime)."""
        self.primitive_index = {name: i for i, name in enumerate(backend.spec.actions)}
        """Backend action index by name: skills yield names."""
        self._executor: SkillExecutor | None = None
        self.plans: dict[int, PlanState] = {}
        """Env -> where its plan stands in this episode, once a plan action ran (macro_actions)."""
        # All stepping of a session happens on its own thread: envs keep their state on one thread (and
        # mostly one core) instead of hopping across gRPC pool threads (measured: make bench-env).
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"session-{session_id}")
        self.slots = [EnvSlot(backend.make_env()) for _ in range(num_envs)]
        self._reset_slots(list(range(num_envs)))

    def on_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Runs ``fn`` on the session's own thread and returns its result (exceptions propagate).

        A closed session raises NotFound, as if it had never been found: a close can race any call.
        """
        if self.closed:
            raise session_not_found(self.id, self._settings)
        try:
            future = self._thread.submit(fn, *args, **kwargs)
        except RuntimeError:  # "cannot schedule new futures after shutdown": a close got in first
            raise session_not_found(self.id, self._settings) from None
        return future.result()

    @property
    def num_envs(self) -> int:
        return len(self.slots)

    def touch(self) -> None:
        self.last_used = time.monotonic()

    # --- reset --------------------------------------------------------------------------------------
    def new_episode(self, i: int, seed: int | None = None) -> None:
        """Resets env ``i`` to its next world (or ``seed``'s again), the episode in the prefix until handed over."""
        plan = self.plans.pop(i, None)
        if plan is not None and plan.suspended is not None and self._executor is not None:
            self._executor.stop([plan_slot(self, i)])  # a new episode starts its plan afresh
        slot = self.slots[i]
        if seed is None:
            seed = self.seed + i + slot.episodes_started * self.num_envs
            slot.episodes_started += 1
        slot.seed = seed
        slot.image, slot.vector = slot.env.reset(seed)
        slot.changed()
        if self.task.start_inventory:
            for item, count in self.task.start_inventory:
                slot.env.give(item, count)
            slot.image, slot.vector = slot.env.observe()
            slot.changed()
        slot.episode = Episode(inventory=slot.env.inventory(), health=slot.env.health(),
                               stages_done=[False] * len(self.stages), in_prefix=bool(self.prefix))
        slot.needs_reset = False

    def _reset_slots(self, indices: list[int], should_stop: Callable[[], bool] | None = None) -> dict[int, int]:
        """New episodes in the listed envs: each reset, the prefix run in them together, then handed over to the
        client. Returns the prefix's frames per env (none without a prefix)."""
        for i in indices:
            self.new_episode(i)
        frames = run_prefix(self, self._executor_for_skills(), indices, should_stop) if self.prefix and indices else {}
        for i in indices:
            self._hand_over(self.slots[i], frames.get(i, 0))
        self._count_frames(sum(frames.values()))
        return frames

    def _count_frames(self, frames: int) -> None:  # every env frame the session stepped, the prefix's too
        self.total_frames += frames
        metrics.ENV_STEPS.labels(self.backend.spec.name).inc(frames)

    def _hand_over(self, slot: EnvSlot, prefix_frames: int) -> None:
        """The env's episode is the client's from here: its steps so far are the prefix's, its record starts."""
        episode = slot.episode
        episode.in_prefix = False
        episode.steps = episode.prefix_steps = prefix_frames
        episode.error = None  # a prefix skill's error ended its step (logged); it is not the episode's
        if self.record:
            episode.trajectory = recorder_for(self.backend, self.task)
            after = f"after the prefix ({prefix_frames} frames)" if self.prefix else ""
            episode.trajectory.start(slot.perception(), slot.env.nearby_text(), after=after)
        if self.animations is not None:
            self.animations.start(slot)  # from the client's first observation

    def reset(self, indices: list[int], seed: int = 0) -> list[int]:
        """Resets the listed envs (all when empty); a non-zero ``seed`` restarts the seed sequence."""
        if seed:
            self.seed = seed
            for slot in self.slots:
                slot.episodes_started = 0
        chosen = indices or list(range(self.num_envs))
        self._reset_slots(chosen)
        return chosen

    def prefix_frames(self, indices: list[int]) -> list[int]:
        """Per listed env, the frames its prefix took when its observation is its episode's first, else 0."""
        episodes = [self.slots[i].episode for i in indices]
        return [e.prefix_steps if e.steps == e.prefix_steps else 0 for e in episodes]

    def observations(self, indices: list[int]) -> tuple[np.ndarray, np.ndarray]:
        vectors = np.stack([self.slots[i].vector for i in indices])
        return (np.stack([self.slots[i].image for i in indices]),
                vectors if self.observe is None else vectors * self.observe)

    # --- step ---------------------------------------------------------------------------------------
    def step(self, actions: list[int], should_stop: Callable[[], bool] | None = None,
             indices: list[int] | None = None) -> StepOutcome:
        """Steps every env once (or the envs in ``indices``, ``actions`` in their order): primitives take one
        frame, skills up to ``skill_max_steps``. The outcome's rows follow the stepped envs' order."""
        n = self.num_envs
        chosen = list(range(n)) if indices is None else list(indices)
        full = [0] * n
        for j, i in enumerate(chosen):
            full[i] = actions[j]
        for i in chosen:
            if self.slots[i].needs_reset:
                raise FailedPrecondition(f"env {i} of session {self.id} finished its episode and the session has "
                                         "no autoreset; call Reset for it first")
        out = StepOutcome.empty(n)
        skill_envs: list[int] = []
        for i in chosen:
            action = self.actions[full[i]]
            if not action.macro:
                self.frame(i, action.primitive, action.name, out)
            else:
                skill_envs.append(i)
        if skill_envs:
            run_skills(self, self._executor_for_skills(), skill_envs, full, out, should_stop)
        ended: list[int] = []
        for i in chosen:
            slot = self.slots[i]
            info = out.infos[i]
            info["success"] = slot.episode.success
            info["stages_done"] = list(slot.episode.stages_done)
            info["episode_steps"] = slot.episode.steps
            info["episode_return"] = slot.episode.episode_return
            if out.terminated[i] or out.truncated[i]:
                info["end_reason"] = slot.episode.end_reason
                self.finish_animation(i)
                if self.record:
                    info["episode_summary"] = self.summary(i)
                metrics.ENV_EPISODES.labels(self.backend.spec.name, slot.episode.end_reason).inc()
                if self.autoreset:
                    ended.append(i)
                    info["was_reset"] = True
                else:
                    slot.needs_reset = True
        self._count_frames(int(out.frames.sum()))
        for i, prefix_frames in self._reset_slots(ended, should_stop).items():
            out.frames[i] += prefix_frames  # env frames of this step, as the proto says
        return out if indices is None else out.rows(chosen)

    def frame(self, i: int, primitive: int, name: str, out: StepOutcome) -> bool:
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
        judged = not episode.in_prefix  # the prefix's frames earn nothing and are not the client's task's
        just_succeeded = judged and not episode.success and self.task.holds(unlocked, inventory)
        stages_done = 0
        for j, stage in enumerate(self.stages):
            if judged and not episode.stages_done[j] and stage.holds(unlocked, inventory):  # sticky, as success is
                episode.stages_done[j], episode.stage_frames[j] = True, episode.steps + 1  # this frame's step
                stages_done += 1
        reward = 0.0 if not judged else step_reward(
            self.reward_terms, native=raw.native_reward, newly_unlocked=set(new), gained=gained,
            health_delta=health - episode.health, died=raw.dead, just_succeeded=just_succeeded,
            stages_done=stages_done)
        episode.steps += 1
        episode.episode_return += reward
        episode.unlocked.extend(new)
        episode.success = episode.success or just_succeeded
        if episode.trajectory is not None:
            record_frame(slot, name, new, gained, inventory)
        episode.inventory, episode.health = inventory, health
        out.rewards[i] += reward
        out.frames[i] += 1
        if self.on_frame is not None and judged:
            self.on_frame(i)
        if slot.animation is not None and judged:  # a Reset's prefix runs before the new episode's record starts
            slot.animation.add(episode.steps, slot.image)
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
        elif judged and episode.steps - episode.prefix_steps >= self.episode_length:
            episode.end_reason = "time_limit"
            out.truncated[i] = True
        return bool(out.terminated[i] or out.truncated[i])

    def _executor_for_skills(self) -> SkillExecutor:
        if self._executor is None:
            self._executor = (GuardedExecutor(self._settings, self.guards, self.slots) if self.guards
                              else SkillExecutor(self._settings))
        return self._executor

    def finish_animation(self, i: int) -> None:
        """Env ``i``'s episode has ended: its animation is made where the session still wants one of its kind."""
        if self.animations is not None:
            self.animations.end(self.slots, i)

    def summary(self, i: int) -> dict[str, Any]:
        """What env ``i``'s current episode did, for RunSkill and the critic."""
        return episode_summary(self.slots[i])

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
