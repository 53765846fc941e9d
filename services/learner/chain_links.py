"""Which link of a chain each env is on: the pure bookkeeping of a chain evaluation (no env, no model), so its
rules are testable alone. A link runs until its stage is done (StepInfo.stages_done) or its frames are spent; a
coded link also moves on when its skill fails or makes no progress; links already done are passed at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from rlgpt.v1 import learner_pb2


@dataclasses.dataclass(frozen=True)
class Link:
    """One link as the stepper needs it: who acts (a skill or a job) and its frame budget (0: none)."""

    name: str
    skill: str = ""
    job_id: str = ""
    max_frames: int = 0

    @classmethod
    def from_proto(cls, link: learner_pb2.ChainLink) -> Link:
        return cls(name=link.name, skill=link.skill, job_id=link.job_id, max_frames=link.max_frames)


@dataclasses.dataclass
class _Counts:
    reached: int = 0
    succeeded: int = 0
    frames: int = 0


class LinkStepper:
    """Per env of a chain session, the link it is on, over its first episode; counts reached/succeeded/frames."""

    def __init__(self, links: Sequence[Link], num_envs: int):
        if not links:
            raise ValueError("a chain needs at least one link")
        self.links = list(links)
        self.current = [0] * num_envs
        """Link index per env; len(links) once the chain is through (the last link's controller acts on)."""
        self.spent = [0] * num_envs
        """Frames each env has spent in its current link."""
        self.finished = [False] * num_envs
        """Whether the env's first episode ended (later episodes are not counted)."""
        self._counts = [_Counts() for _ in self.links]
        for i in range(num_envs):
            self._start(i, 0)

    def controller(self, i: int) -> int | None:
        """The index of the link whose controller acts for env ``i`` now; None once its first episode ended."""
        if self.finished[i]:
            return None
        return min(self.current[i], len(self.links) - 1)

    def after_step(self, i: int, *, frames: int, stages_done: Sequence[bool], skill_error: bool = False,
                   skill_finished: bool = False, episode_ended: bool = False, probe: bool = False) -> None:
        """Books one step of env ``i`` (``stages_done``: one per link, as the env reported them) and moves it on.
        A ``probe`` step (the noop that reads the stages before any link acts) only passes the links done."""
        if self.finished[i]:
            return
        link = self.current[i]
        through = link >= len(self.links)
        if probe and not episode_ended:
            self._pass_done_links(i, stages_done)
            return
        if not through and not probe:
            self.spent[i] += frames
            self._counts[link].frames += frames
        if episode_ended:  # nothing starts after the episode: only the running link's success counts
            if not through and stages_done[link]:
                self._counts[link].succeeded += 1
            self.finished[i] = True
            return
        if through:
            return
        if stages_done[link]:
            self._counts[link].succeeded += 1
            self._start(i, link + 1)
        elif self._gives_up(link, self.spent[i], frames, skill_error, skill_finished):
            self._start(i, link + 1)
        self._pass_done_links(i, stages_done)

    def _gives_up(self, link: int, spent: int, frames: int, skill_error: bool, skill_finished: bool) -> bool:
        budget = self.links[link].max_frames
        if budget and spent >= budget:
            return True
        if not self.links[link].skill:
            return False  # a policy's own skill errors are its business; it acts on
        # A skill that returned after at most one frame (the server spends a noop for one that returned at once)
        # would only do the same again.
        return skill_error or frames == 0 or (skill_finished and frames <= 1)

    def _pass_done_links(self, i: int, stages_done: Sequence[bool]) -> None:
        """Links whose conditions hold as they start are reached and succeeded with no frames."""
        while self.current[i] < len(self.links) and stages_done[self.current[i]]:
            self._counts[self.current[i]].succeeded += 1
            self._start(i, self.current[i] + 1)

    def _start(self, i: int, link: int) -> None:
        self.current[i] = link
        self.spent[i] = 0
        if link < len(self.links):
            self._counts[link].reached += 1

    def stats(self) -> list[learner_pb2.LinkStats]:
        return [learner_pb2.LinkStats(name=link.name, reached=c.reached, succeeded=c.succeeded,
                                      mean_frames=c.frames / c.reached if c.reached else 0.0)
                for link, c in zip(self.links, self._counts, strict=True)]
