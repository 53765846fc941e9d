"""What every part of a run shares: the run, its state, the services, its resolved budgets, and the bookkeeping
(stop checks, the frame budget, saving)."""

from __future__ import annotations

import dataclasses
import enum
import json
import threading
from collections.abc import Iterable
from typing import Any

from rlgpt import deadlines
from rlgpt.config import LLMSettings
from rlgpt.errors import FailedPrecondition
from rlgpt.v1 import critic_pb2_grpc, env_pb2, env_pb2_grpc, learner_pb2_grpc, planner_pb2
from services.planner import game_task
from services.planner.budgets import resolve_budgets
from services.planner.prompts import EvalProtocol
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState, SubTaskState


class Mode(enum.StrEnum):
    """What solves the sub-tasks (the paper's ablations; StartRunRequest.mode)."""

    RL_GPT = "rl-gpt"
    """Both: code where the agents decide, RL elsewhere, code that keeps failing moves to RL."""
    PURE_RL = "pure-rl"
    """One RL training on the whole task, primitives only, no LLM."""
    PURE_CODE = "pure-code"
    """Every sub-task coded."""


class AgentSetup(enum.StrEnum):
    """Which agents take part (StartRunRequest.agents)."""

    SLOW_FAST_CRITIC = "slow-fast-critic"
    SLOW_FAST = "slow-fast"
    """No critic: the agents see the measured success rate and the first error."""
    ONE = "one"
    """One LLM plans, codes and configures in one answer per outer iteration (the paper's one-agent ablation);
    no critic: the next answer sees the measured success rates and errors."""


@dataclasses.dataclass
class Stubs:
    """The services the loops call; learner and critic are optional (setups without them)."""

    env: env_pb2_grpc.EnvServiceStub
    learner: learner_pb2_grpc.LearnerServiceStub | None
    critic: critic_pb2_grpc.CriticServiceStub | None
    judge_seconds: float = deadlines.judge_seconds(LLMSettings())
    """The deadline of the critic's Judge and JudgeTask (:func:`rlgpt.deadlines.judge_seconds` of the planner's
    LLM settings, which the critic shares)."""


class StopRequested(Exception):
    """StopRun was called; the run saves its state and ends resumable."""


@dataclasses.dataclass
class RunContext:
    """One run's shared pieces; ``budgets`` has every field set (the planner's defaults filled in)."""

    run: Run
    state: RunState
    describe: env_pb2.DescribeResponse
    stubs: Stubs
    library: SkillLibrary
    settings: PlannerSettings
    budgets: planner_pb2.Budgets
    mode: Mode
    agents: AgentSetup
    protocol: EvalProtocol
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)
    """Held by :meth:`spend` and :meth:`save`: the RL sub-tasks of a round train in threads of their own."""

    @classmethod
    def create(cls, run: Run, state: RunState, describe: env_pb2.DescribeResponse, stubs: Stubs,
               library: SkillLibrary, settings: PlannerSettings) -> RunContext:
        request = run.request
        # The planner's defaults where the request has none.
        budgets = resolve_budgets(request.budgets, settings, request.task)
        protocol = EvalProtocol(test_episodes=settings.test_episodes, test_steps=settings.test_steps,
                                env_frames=budgets.env_frames_per_training, eval_episodes=budgets.eval_episodes,
                                final_frames=game_task.episode_frames(request.task, settings),
                                game=game_task.is_game(request.task)).with_rules(describe.rules)
        (run.dir / "attempts").mkdir(exist_ok=True)
        state.frame_budget = int(budgets.total_env_frames)
        return cls(run=run, state=state, describe=describe, stubs=stubs, library=library, settings=settings,
                   budgets=budgets, mode=Mode(request.mode or Mode.RL_GPT),
                   agents=AgentSetup(request.agents or AgentSetup.SLOW_FAST_CRITIC), protocol=protocol)

    @property
    def seed(self) -> int:
        return self.run.request.seed

    @property
    def items(self) -> set[str]:
        return set(self.describe.items)

    def check_stop(self) -> None:
        """Raises StopRequested after StopRun, FailedPrecondition once the token budget is spent."""
        if self.run.stop_requested.is_set():
            raise StopRequested()
        if self.budgets.max_tokens and self.run.tokens >= self.budgets.max_tokens:
            raise FailedPrecondition(f"the run used {self.run.tokens} LLM tokens, its budget "
                                     f"({self.budgets.max_tokens})")

    @property
    def game(self) -> bool:
        """Whether the run's task is the whole game (:mod:`services.planner.game_task`)."""
        return game_task.is_game(self.run.request.task)

    def evaluations_due(self) -> int:
        """A game task's whole-task evaluations still to come, whose frames the work keeps back: the final one, and
        the iteration's own while an outer iteration runs; 0 for other tasks (their evaluations are not counted)."""
        if not self.game or self.state.final is not None:
            return 0
        return 1 + (self.state.iteration_start is not None)

    def frames_left(self) -> int | None:
        """Frames the run's work may still spend (a game task's evaluations still due kept back); None: unbounded."""
        total = self.budgets.total_env_frames
        reserved = self.evaluations_due() * self.evaluation_hold()
        return None if not total else max(0, total - self.state.frames_used - reserved)

    def evaluation_fits(self) -> bool:
        """Whether an iteration's whole-task evaluation fits the frame budget beside the final one's (always for
        a task whose evaluations are not counted)."""
        total = self.budgets.total_env_frames
        return not self.game or not total or total - self.state.frames_used >= 2 * self.evaluation_hold()

    def episode_cap(self) -> int:
        """Frames a whole-task evaluation's episode may last now (game_task.episode_cap)."""
        return game_task.episode_cap(self.run.request.task, self.settings, self.state.longest_episode)

    def evaluation_hold(self) -> int:
        """The frames one whole-task (or policy) evaluation keeps back: ``eval_episodes`` x :meth:`episode_cap`."""
        return self.budgets.eval_episodes * self.episode_cap()

    def note_episodes(self, steps: Iterable[int]) -> None:
        """A game task's evaluation episodes' lengths: the longest sets later evaluations' cap; thread-safe."""
        if self.game:
            with self._lock:
                self.state.longest_episode = max(self.state.longest_episode, *steps, 0)

    def spend_evaluation(self, frames: int) -> None:
        """Counts a game task's whole-task evaluation against the run's budget (other tasks' are not counted)."""
        if self.game:
            with self._lock:
                self.state.frames_used += frames
                self.state.evaluation_frames += frames

    def spend(self, subtask: SubTaskState, frames: int) -> None:
        """Counts frames against the run's budget and the sub-task's; thread-safe."""
        with self._lock:
            self.state.frames_used += frames
            subtask.frames += frames

    def spend_training(self, subtask: SubTaskState, job_id: str, frames: int, *, ended: bool = False) -> None:
        """Counts a training's frames as its learner reports them (``frames``: the job's total so far) against the
        run's budget and the sub-task's, keeping what was counted of the job in ``RunState.trainings`` until it
        ``ended`` (a run that pauses during the training counts the rest on resume); thread-safe."""
        with self._lock:
            counted = self.state.trainings.setdefault(job_id, {"subtask": subtask.name, "frames": 0})
            more = max(0, frames - int(counted["frames"]))
            self.state.frames_used += more
            subtask.frames += more
            counted["frames"] = int(counted["frames"]) + more
            if ended:
                del self.state.trainings[job_id]

    def resume_training(self, subtask: SubTaskState, job_id: str, counted: int) -> None:
        """A stopped training's job going on (resumed from its checkpoint): ``counted`` of its frames, the total its
        learner reports, were counted before and are not counted again; thread-safe."""
        with self._lock:
            self.state.trainings[job_id] = {"subtask": subtask.name, "frames": counted}

    def save(self) -> None:
        """Writes state.json (tmp then rename, one tmp path) and status.json; thread-safe."""
        with self._lock:
            self.state.save(self.run.dir)
            self.run.save_status()

    def attempt_file(self, name: str, payload: dict[str, Any]) -> None:
        """An attempt's details (candidates, curve) in ``attempts/iter<outer>_<name>.json``."""
        path = self.run.dir / "attempts" / f"iter{self.state.outer_iteration}_{name}.json"
        path.write_text(json.dumps(payload, indent=1))
