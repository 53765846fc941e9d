"""What the planner passes to the critic from an attempt's episodes, an RL attempt's training and verdict steps,
and its macro actions (written by the fast agent, registered on the real env server, joined to the config's
skills, refused with their line)."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import pytest
from fakes.fake_learner import FakeLearner, frames

from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner import trainings as trainings_module
from services.planner.attempts import Attempts, RLAttempt
from services.planner.context import RunContext, StopRequested, Stubs
from services.planner.judging import JUDGE_FRAMES_PER_EPISODE, judge_frames, whole_episodes
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState, SubTaskState


def test_judge_frames_take_whole_episodes_failed_first_up_to_the_critics_limit() -> None:
    episodes = [common_pb2.EpisodeSummary(success=s) for s in (True, False, True, False)]
    ordered = judge_frames(episodes, [frames("a", 3), frames("b", 3), frames("c", 3), frames("d", 3)])
    chosen = whole_episodes(ordered, 8)
    assert chosen == [b"b0", b"b1", b"b2", b"d0", b"d1", b"d2"]  # a third episode would not fit whole
    all_passed = [common_pb2.EpisodeSummary(success=True)] * 2
    assert whole_episodes(judge_frames(all_passed, [frames("a", 4), frames("b", 4)]), 8) == [
        b"a0", b"a1", b"a2", b"a3", b"b0", b"b1", b"b2", b"b3"]
    assert whole_episodes(ordered, 2) == []  # no episode fits whole


def test_judge_frames_without_frames_are_none() -> None:
    assert judge_frames([common_pb2.EpisodeSummary()] * 3, []) == []


class FakeCritic:
    def __init__(self, max_frames: int = 8) -> None:
        self.requests: list[critic_pb2.JudgeRequest] = []
        self.max_frames = max_frames

    def DescribeCritic(self, request: critic_pb2.DescribeCriticRequest, timeout: float
                       ) -> critic_pb2.DescribeCriticResponse:
        return critic_pb2.DescribeCriticResponse(success_threshold=0.8, max_rollouts=256, max_code_bytes=65536,
                                                 max_frames=self.max_frames, max_frame_bytes=2_000_000,
                                                 max_curve_points=10000)

    def Judge(self, request: critic_pb2.JudgeRequest, timeout: float) -> critic_pb2.JudgeResponse:
        self.requests.append(request)
        return critic_pb2.JudgeResponse(verdict=critic_pb2.Verdict(target=critic_pb2.TARGET_FAST))


def rl_attempt(tmp_path: Path, agents: str, env_frame_limit: int = 8) -> tuple[FakeLearner, FakeCritic]:
    learner, critic = FakeLearner(), FakeCritic()
    describe = env_pb2.DescribeResponse(backend="crafter",
                                        limits=env_pb2.ServerLimits(max_frames_per_episode=env_frame_limit))
    spec = common_pb2.TaskSpec(name="eat_cow", success=[common_pb2.Condition(achievement="eat_cow")])
    run = Run(tmp_path / "run", planner_pb2.StartRunRequest(task=spec, agents=agents))
    ctx = RunContext.create(run, RunState(), describe, Stubs(env=None, learner=learner, critic=critic),
                            SkillLibrary(tmp_path / "lib.json"), PlannerSettings())
    subtask = planner_pb2.SubTask(name="eat_cow", success=list(spec.success))
    Attempts(ctx, None).train(subtask, SubTaskState(name="eat_cow", decision="rl"),
                              learner_pb2.RLConfig(task=spec, env_frames=500))
    return learner, critic


def rl_context(tmp_path: Path, learner: object, agents: str = "slow-fast") -> RunContext:
    spec = common_pb2.TaskSpec(name="eat_cow", success=[common_pb2.Condition(achievement="eat_cow")])
    run = Run(tmp_path / "run", planner_pb2.StartRunRequest(task=spec, agents=agents))
    return RunContext.create(run, RunState(), env_pb2.DescribeResponse(backend="crafter"),
                             Stubs(env=None, learner=learner, critic=None), SkillLibrary(tmp_path / "lib.json"),
                             PlannerSettings())


def test_an_rl_attempts_training_step_then_its_verdict_step(tmp_path: Path) -> None:
    learner = FakeLearner()
    ctx = rl_context(tmp_path, learner)
    state = SubTaskState(name="eat_cow", decision="rl")
    attempt = RLAttempt(planner_pb2.SubTask(name="eat_cow"), state, [],
                        config=learner_pb2.RLConfig(name="eat_cow", env_frames=500), refused="Macro x was refused.")
    attempts = Attempts(ctx, None)
    attempts.train_and_evaluate(attempt)
    assert attempt.trained.job_id == "j1" == state.job_id and len(attempt.trained.curve) == 10
    assert state.frames == ctx.state.frames_used == 500 and state.tests[-1]["success_rate"] == 0.5
    assert not any(e.HasField("verdict") for e in ctx.run.events)  # judging is the third step
    verdict = attempts.verdict(attempt)
    assert verdict.success and verdict.diagnosis == "success rate 50% Macro x was refused."
    # An attempt with nothing to train (an unusable answer) has no verdict; the refusal goes to the feedback.
    empty = RLAttempt(planner_pb2.SubTask(name="eat_cow"), state, [], refused="Macro y was refused.")
    attempts.train_and_evaluate(empty)
    assert attempts.verdict(empty) is None and state.feedback.endswith("Macro y was refused.")


def test_a_halted_or_stopped_training_does_not_start(tmp_path: Path) -> None:
    learner = FakeLearner()
    ctx = rl_context(tmp_path, learner)
    attempt = RLAttempt(planner_pb2.SubTask(name="eat_cow"), SubTaskState(name="eat_cow", decision="rl"), [],
                        config=learner_pb2.RLConfig(name="eat_cow", env_frames=500))
    halt = threading.Event()
    halt.set()
    with pytest.raises(StopRequested):
        Attempts(ctx, None).train_and_evaluate(attempt, halt)
    ctx.run.stop_requested.set()
    with pytest.raises(StopRequested):
        Attempts(ctx, None).train_and_evaluate(attempt)
    assert learner.configs == [] and attempt.trained is None


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.RpcError:
    error = grpc.RpcError()
    error.code, error.details = (lambda: code), (lambda: details)
    return error


class RefusingLearner(FakeLearner):
    def StartTraining(self, request: learner_pb2.StartTrainingRequest) -> learner_pb2.StartTrainingResponse:
        raise rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "env_frames=0: the frame budget must be > 0")


class BusyLearner(FakeLearner):
    """Runs as many jobs as it may for its first two StartTraining calls."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    def StartTraining(self, request: learner_pb2.StartTrainingRequest) -> learner_pb2.StartTrainingResponse:
        if self.refused < 2:
            self.refused += 1
            raise rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "4 jobs are running, the learner's limit (4)")
        return super().StartTraining(request)


def test_a_training_waits_for_a_slot_of_a_busy_learner(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(trainings_module, "LEARNER_BUSY_SECONDS", 0.01)
    learner = BusyLearner()
    ctx = rl_context(tmp_path, learner)
    state = SubTaskState(name="eat_cow", decision="rl")
    verdict = Attempts(ctx, None).train(planner_pb2.SubTask(name="eat_cow"), state,
                                        learner_pb2.RLConfig(name="eat_cow", env_frames=500))
    assert learner.refused == 2 and state.job_id == "j1" and verdict.success_rate == 0.5
    assert sum(e.HasField("config") for e in ctx.run.events) == 1
    # A halt (a stop, another training's failure) while it waits ends the wait: nothing started.
    busy = BusyLearner()
    ctx = rl_context(tmp_path / "b", busy)
    halt = threading.Event()
    attempt = RLAttempt(planner_pb2.SubTask(name="eat_cow"), SubTaskState(name="eat_cow"), [],
                        config=learner_pb2.RLConfig(name="eat_cow", env_frames=500))
    monkeypatch.setattr(trainings_module.time, "sleep", lambda seconds: halt.set())
    with pytest.raises(StopRequested):
        Attempts(ctx, None).train_and_evaluate(attempt, halt)
    assert busy.refused == 1 and busy.configs == []


def test_a_config_the_learner_refuses_trains_nothing_and_has_no_verdict(tmp_path: Path) -> None:
    ctx = rl_context(tmp_path, RefusingLearner())
    state = SubTaskState(name="eat_cow", decision="rl")
    verdict = Attempts(ctx, None).train(planner_pb2.SubTask(name="eat_cow"), state,
                                        learner_pb2.RLConfig(name="eat_cow"))
    assert verdict is None and state.feedback == "the learner refused the config: env_frames=0: the frame " \
                                                 "budget must be > 0"
    assert state.tests[-1]["error"] == state.feedback and not state.job_id


def test_an_rl_attempt_asks_for_frames_and_passes_the_failed_episode_first_to_the_critic(tmp_path: Path) -> None:
    learner, critic = rl_attempt(tmp_path, "slow-fast-critic")
    assert [r.frames_per_episode for r in learner.evaluations] == [JUDGE_FRAMES_PER_EPISODE]
    [judged] = critic.requests
    assert list(judged.frames) == [b"lost0", b"lost1", b"lost2", b"lost3", b"won0", b"won1", b"won2", b"won3"]


def test_no_more_frames_are_asked_for_than_the_env_server_allows(tmp_path: Path) -> None:
    learner, _ = rl_attempt(tmp_path, "slow-fast-critic", env_frame_limit=2)
    assert [r.frames_per_episode for r in learner.evaluations] == [2]


def test_without_a_critic_no_frames_are_asked_for(tmp_path: Path) -> None:
    learner, critic = rl_attempt(tmp_path, "slow-fast")
    assert [r.frames_per_episode for r in learner.evaluations] == [0] and not critic.requests


def test_a_setup_without_the_critics_verdicts_counts_solved_at_the_critics_threshold(tmp_path: Path) -> None:
    # The evaluation succeeds in 1 of 2 episodes: solved for a planner with no critic at all, not at the
    # critic's 0.8 (its DescribeCritic) in a setup that does not ask it to judge.
    spec = common_pb2.TaskSpec(name="eat_cow", success=[common_pb2.Condition(achievement="eat_cow")])
    for critic, solved in ((None, True), (FakeCritic(), False)):
        ctx = rl_context(tmp_path / str(solved), FakeLearner())
        ctx.stubs.critic = critic
        verdict = Attempts(ctx, None).train(planner_pb2.SubTask(name="eat_cow", success=list(spec.success)),
                                            SubTaskState(name="eat_cow", decision="rl"),
                                            learner_pb2.RLConfig(task=spec, env_frames=500))
        assert verdict.success_rate == 0.5 and verdict.success is solved
        assert critic is None or not critic.requests


