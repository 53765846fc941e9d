"""RunSkill's test episodes: one private recording session whose every env runs the skill once, as one
skill action of up to ``max_steps`` frames, or runs a plan of skills (an all-code chain, :func:`run_plan`),
summarised per episode (with a few frames sampled where asked)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from rlgpt.errors import FailedPrecondition, InvalidArgument
from rlgpt.frames import FrameSampler
from rlgpt.v1 import env_pb2
from services.env_server.sessions.macro_actions import plan_stage
from services.env_server.sessions.session import Session
from services.env_server.sessions.session_builder import build_session
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillRegistry

SLOT_WAIT_SECONDS = 30
"""How long a RunSkill waits for one of the slots before it is refused."""


@dataclasses.dataclass
class TrialEpisode:
    """One test episode: its summary (recording.episode_summary) and its sampled frames."""

    summary: dict[str, Any]
    frame_steps: list[int] = dataclasses.field(default_factory=list)
    frames: list[bytes] = dataclasses.field(default_factory=list)
    """PNG bytes, ``request.frames_per_episode`` at most, in step order, the episode's last frame included."""


class SkillTrials:
    """Runs test episodes of registered skills, a bounded number of calls at a time."""

    def __init__(self, settings: EnvServerSettings, registry: SkillRegistry):
        self.settings = settings
        self.registry = registry
        # RunSkill sessions are private but still cost envs: they share the session limit's budget.
        self._slots = threading.BoundedSemaphore(settings.max_skill_tests)

    def run(self, request: env_pb2.RunSkillRequest, should_stop: Callable[[], bool]) -> list[TrialEpisode]:
        """``request.episodes`` episodes, in env order."""
        plan = list(request.plan)
        if "" in plan:
            raise InvalidArgument(f"plan[{plan.index('')}] is empty: RunSkill runs every stage's skill itself (a "
                                  "stage a client plays, an empty name, needs a session of that client)")
        if plan and request.prefix:
            raise InvalidArgument("give `prefix` with `skill`, not with `plan`: a plan runs every stage itself from "
                                  "the episode's start")
        record = self.registry.get(plan[0] if plan else request.skill)
        max_steps = request.max_steps or self.settings.run_skill_default_steps
        session_request = env_pb2.CreateSessionRequest(
            backend=request.backend or record.backend, task=request.task, seed=request.seed,
            num_envs=request.episodes, reward_terms=request.reward_terms, episode_length=max_steps,
            skills=[] if plan else [record.name], plan=plan, stages=request.stages, autoreset=False,
            animate=request.animate, prefix=request.prefix, guards=request.guards)
        if not self._slots.acquire(timeout=SLOT_WAIT_SECONDS):
            raise FailedPrecondition("too many RunSkill calls in progress; retry shortly")
        try:
            session = build_session(self.settings, self.registry, "runskill", session_request, record=True)
            session.skill_max_steps = max_steps  # a test episode is one skill action of up to max_steps frames
            try:
                samplers = [FrameSampler(request.frames_per_episode) for _ in range(session.num_envs)]
                if request.frames_per_episode:
                    def sample(i: int) -> None:
                        slot = session.slots[i]
                        samplers[i].add(slot.episode.steps, slot.image)

                    for i in range(session.num_envs):
                        sample(i)  # step 0: the observation after the reset
                    session.on_frame = sample
                macro = len(session.actions) - 1  # the skill's action, or the plan's
                if plan:
                    run_plan(session, macro, should_stop)
                else:
                    session.step([macro] * session.num_envs, should_stop=should_stop)
                for i in range(session.num_envs):  # episodes still going (their skill returned) end here
                    session.finish_animation(i)
                return [TrialEpisode(session.summary(i), *samplers[i].sample()) for i in range(session.num_envs)]
            finally:
                session.close()
        finally:
            self._slots.release()


def run_plan(session: Session, plan_action: int, should_stop: Callable[[], bool]) -> None:
    """Plan actions for every env until its episode ends or every stage is done (the plan has nothing left to
    run): an all-code chain with no policy, the same plan action a kept plan's policy steps in between. On the
    whole-game task an episode lasts as the game's benchmark plays it: an env whose stages are all done idles on
    until its episode ends (death, or its length), as a learner's chain does."""
    live = list(range(session.num_envs))
    while live and not should_stop():
        session.step([plan_action] * len(live), should_stop=should_stop, indices=live)
        live = [i for i in live if not session.slots[i].needs_reset and plan_stage(session, i) is not None]
    idle = [i for i in range(session.num_envs) if session.task.game and not session.slots[i].needs_reset]
    while idle and not should_stop():
        session.step([session.backend.spec.noop_action] * len(idle), should_stop=should_stop, indices=idle)
        idle = [i for i in idle if not session.slots[i].needs_reset]
