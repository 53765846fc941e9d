"""What the planner passes to the critic from an attempt's episodes."""

from __future__ import annotations

from pathlib import Path

from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner.attempts import JUDGE_FRAMES_PER_EPISODE, JUDGE_MAX_FRAMES, Attempts, judge_frames
from services.planner.context import RunContext, Stubs
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState, SubTaskState


def frames(tag: str, n: int) -> env_pb2.EpisodeFrames:
    return env_pb2.EpisodeFrames(png=[f"{tag}{i}".encode() for i in range(n)], steps=list(range(n)))


def test_judge_frames_take_whole_episodes_failed_first_up_to_the_limit() -> None:
    episodes = [common_pb2.EpisodeSummary(success=s) for s in (True, False, True, False)]
    chosen = judge_frames(episodes, [frames("a", 3), frames("b", 3), frames("c", 3), frames("d", 3)])
    assert chosen == [b"b0", b"b1", b"b2", b"d0", b"d1", b"d2"]  # a third episode would not fit whole
    assert JUDGE_MAX_FRAMES == 8
    all_passed = [common_pb2.EpisodeSummary(success=True)] * 2
    assert judge_frames(all_passed, [frames("a", 4), frames("b", 4)]) == [b"a0", b"a1", b"a2", b"a3",
                                                                         b"b0", b"b1", b"b2", b"b3"]


def test_judge_frames_without_frames_are_none() -> None:
    assert judge_frames([common_pb2.EpisodeSummary()] * 3, []) == []


class FakeLearner:
    """A training that succeeds at once and an evaluation with frames where asked."""

    def __init__(self) -> None:
        self.evaluations: list[learner_pb2.EvaluateRequest] = []

    def StartTraining(self, request: learner_pb2.StartTrainingRequest) -> learner_pb2.StartTrainingResponse:
        return learner_pb2.StartTrainingResponse(job_id="j1")

    def WatchJob(self, request: learner_pb2.WatchJobRequest, timeout: float) -> list[learner_pb2.JobProgress]:
        return [learner_pb2.JobProgress(job_id="j1", state=learner_pb2.JOB_STATE_SUCCEEDED, env_frames=500)]

    def Evaluate(self, request: learner_pb2.EvaluateRequest, timeout: float) -> learner_pb2.EvaluateResponse:
        self.evaluations.append(request)
        n = request.frames_per_episode
        return learner_pb2.EvaluateResponse(
            success_rate=0.5, episodes=[common_pb2.EpisodeSummary(success=True), common_pb2.EpisodeSummary()],
            frames=[frames("won", n), frames("lost", n)] if n else [])


class FakeCritic:
    def __init__(self) -> None:
        self.requests: list[critic_pb2.JudgeRequest] = []

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
