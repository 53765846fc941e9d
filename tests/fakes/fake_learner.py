"""A TEST DOUBLE of the learner service, called in process by the planner's attempt tests: a training that succeeds
at once, and an evaluation with frames where asked."""

from __future__ import annotations

from rlgpt.v1 import common_pb2, env_pb2, learner_pb2


def frames(tag: str, n: int) -> env_pb2.EpisodeFrames:
    return env_pb2.EpisodeFrames(png=[f"{tag}{i}".encode() for i in range(n)], steps=list(range(n)))


class FakeLearner:
    """A training that succeeds at once and an evaluation with frames where asked."""

    def __init__(self) -> None:
        self.evaluations: list[learner_pb2.EvaluateRequest] = []
        self.configs: list[learner_pb2.RLConfig] = []

    def StartTraining(self, request: learner_pb2.StartTrainingRequest) -> learner_pb2.StartTrainingResponse:
        self.configs.append(request.config)
        return learner_pb2.StartTrainingResponse(job_id=f"j{len(self.configs)}")

    def WatchJob(self, request: learner_pb2.WatchJobRequest, timeout: float) -> list[learner_pb2.JobProgress]:
        """Ten progress points up to 500 frames, the last one finished."""
        return [learner_pb2.JobProgress(
            job_id=request.job_id, env_frames=50 * i, success_rate=i / 20, mean_return=i / 10,
            state=learner_pb2.JOB_STATE_SUCCEEDED if i == 10 else learner_pb2.JOB_STATE_RUNNING) for i in range(1, 11)]

    def Evaluate(self, request: learner_pb2.EvaluateRequest, timeout: float) -> learner_pb2.EvaluateResponse:
        self.evaluations.append(request)
        n = request.frames_per_episode
        return learner_pb2.EvaluateResponse(
            success_rate=0.5, episodes=[common_pb2.EpisodeSummary(success=True), common_pb2.EpisodeSummary()],
            frames=[frames("won", n), frames("lost", n)] if n else [])
