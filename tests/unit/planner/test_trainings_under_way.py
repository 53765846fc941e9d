"""A training's frames are counted as its learner reports them, and a run that paused during a training counts the
rest on resume (issue 38: a resumed run counts the whole run): the learner dies after the job's first reports, the
run resumed asks the learner for the job (StopJob) and counts what it spent after the run's last look. Test doubles
of the learner, called in process."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from rlgpt.errors import ServiceFailed
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner.context import RunContext, Stubs
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState, SubTaskState
from services.planner.trainings import Training, settle_trainings

SPEC = common_pb2.TaskSpec(name="eat_cow", success=[common_pb2.Condition(achievement="eat_cow")])


class DyingLearner:
    """Reports a job at 300 and 700 frames, then dies (ServiceFailed, as a named channel raises it); started again,
    it answers StopJob with the job's last progress (``final`` frames), or NOT_FOUND for an unknown job."""

    def __init__(self, final: int) -> None:
        self.final = final
        self.stopped: list[str] = []

    def StartTraining(self, request: learner_pb2.StartTrainingRequest) -> learner_pb2.StartTrainingResponse:
        return learner_pb2.StartTrainingResponse(job_id="j1")

    def WatchJob(self, request: learner_pb2.WatchJobRequest, timeout: float):
        for frames in (300, 700):
            yield learner_pb2.JobProgress(job_id=request.job_id, env_frames=frames,
                                          state=learner_pb2.JOB_STATE_RUNNING)
        raise ServiceFailed("learner", "127.0.0.1:1", "WatchJob", grpc.StatusCode.UNAVAILABLE, "Socket closed")

    def StopJob(self, request: learner_pb2.StopJobRequest) -> learner_pb2.JobProgress:
        self.stopped.append(request.job_id)
        if request.job_id != "j1":
            raise NotFoundError()
        return learner_pb2.JobProgress(job_id="j1", env_frames=self.final, state=learner_pb2.JOB_STATE_FAILED,
                                       message="learner_gone: ...")


class NotFoundError(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.NOT_FOUND

    def details(self) -> str:
        return "no job"


def context(run_dir: Path, learner: DyingLearner, state: RunState) -> RunContext:
    return RunContext.create(Run.resume(run_dir) if (run_dir / "request.json").exists()
                             else Run(run_dir, planner_pb2.StartRunRequest(task=SPEC)), state,
                             env_pb2.DescribeResponse(backend="crafter"), Stubs(env=None, learner=learner, critic=None),
                             SkillLibrary(run_dir.parent / "lib.json"), PlannerSettings())


def test_a_training_cut_by_a_dead_learner_is_counted_whole_on_resume(tmp_path: Path) -> None:
    learner = DyingLearner(final=1100)
    state = RunState(subtasks={"eat_cow": SubTaskState(name="eat_cow", decision="rl", frames=40)},
                     frames_used=40)
    ctx = context(tmp_path / "run", learner, state)
    training = Training(ctx, planner_pb2.SubTask(name="eat_cow"), state.subtasks["eat_cow"],
                        learner_pb2.RLConfig(name="eat_cow", env_frames=5000), {})
    with pytest.raises(ServiceFailed):
        training.run()
    paused = RunState.load(ctx.run.dir)  # what a planner killed now would resume from
    assert paused.frames_used == 740 == paused.subtasks["eat_cow"].frames  # counted as reported, saved
    assert paused.trainings == {"j1": {"subtask": "eat_cow", "frames": 700}}

    resumed = context(tmp_path / "run", learner, paused)
    settle_trainings(resumed)
    assert learner.stopped == ["j1"]
    assert resumed.state.frames_used == 1140 == resumed.state.subtasks["eat_cow"].frames
    assert resumed.state.trainings == {}
    last = resumed.run.events[-1]
    assert last.subtask == "eat_cow" and last.training.env_frames == 1100  # the events show every frame too
    assert RunState.load(resumed.run.dir).frames_used == 1140


def test_a_training_the_learner_no_longer_knows_is_let_go(tmp_path: Path) -> None:
    learner = DyingLearner(final=0)
    state = RunState(subtasks={"eat_cow": SubTaskState(name="eat_cow", decision="rl", frames=500)}, frames_used=500,
                     trainings={"gone": {"subtask": "eat_cow", "frames": 500}})
    ctx = context(tmp_path / "run", learner, state)
    settle_trainings(ctx)
    assert learner.stopped == ["gone"] and ctx.state.trainings == {} and ctx.state.frames_used == 500
    assert not ctx.run.events
