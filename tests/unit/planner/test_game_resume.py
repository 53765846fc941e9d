"""A game run stopped while it trains its final-controller candidates and resumed redoes nothing it has
(services/planner/game_resume.py, issue 36): the fast agent's config answer for B, kept as it arrived, is used again
without a second LLM call; a training under way goes on with its job (StartTraining with resume_job_id) from its
checkpoint to the frames it was given, its frames counted once; the record, the event and the report say what was
resumed. A scripted LLM and a test double of the learner, called in process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from kept_plan_support import ScriptedLLM
from test_game_final import SPENT, SpendingLearner
from test_game_kept_plan import ANSWER, game_run
from test_game_macro_controller import Env
from test_game_measure import SETTINGS

from rlgpt.v1 import learner_pb2
from services.planner import game_final, game_task, trainings
from services.planner.agents.fast import FastAgent
from services.planner.context import StopRequested, Stubs
from services.planner.loops import TwoLoops
from services.planner.report_game import controllers_lines
from services.planner.runs import Run
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState
from services.planner.trainings import settle_trainings

AT, CHECKPOINT = 10_000, 12_345
"""The stopped job's last report before StopRun, and the frames it had when StopJob checkpointed it."""
A_FRAMES, B_FRAMES = 30_000, 65_400
"""What the uninterrupted run gives A and B (test_game_final: half each, B also what A's evaluation freed)."""
FRAMES_USED = 100_000 - 2 * game_task.EVALUATION_FLOOR - (2 * game_task.EVALUATION_FLOOR - SPENT)
"""Every frame the uninterrupted run counts by its final evaluation (test_game_final)."""
B_RESUMED = f"resumed from its checkpoint at {CHECKPOINT:,} of {B_FRAMES:,} frames, its config from before the stop"


class Gone(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return f"{self._code.name.lower()}"


class StoppingLearner(SpendingLearner):
    """Trains each job to its config's frames, but StopRun comes while ``stop_job`` trains (after its report at
    ``at`` frames); StopJob answers a job stopped at CHECKPOINT frames (``lost``: unknown to the learner once
    stopped), a job trained to its end SUCCEEDED at its frames, and StartTraining with resume_job_id continues a
    job to its budget. ``unavailable``: the learner is gone when the job with that number would start;
    ``gone_in_evaluation``: when that job's policy is first evaluated."""

    def __init__(self, run: Run, stop_job: str = "", *, unavailable: int = 0, lost: bool = False, at: int = AT,
                 gone_in_evaluation: str = "") -> None:
        super().__init__([])
        self.run, self.stop_job, self.unavailable, self.lost, self.at = run, stop_job, unavailable, lost, at
        self.gone_in_evaluation = gone_in_evaluation
        self.starts: list[learner_pb2.StartTrainingRequest] = []
        self.resumed: set[str] = set()
        self.stopped: list[str] = []
        self.finished: set[str] = set()

    def StartTraining(self, request: learner_pb2.StartTrainingRequest) -> learner_pb2.StartTrainingResponse:
        self.starts.append(request)
        if request.resume_job_id:
            self.resumed.add(request.resume_job_id)
            return learner_pb2.StartTrainingResponse(job_id=request.resume_job_id)
        if len(self.configs) + 1 == self.unavailable:
            self.unavailable = 0
            raise Gone(grpc.StatusCode.UNAVAILABLE)
        return super().StartTraining(request)

    def WatchJob(self, request: learner_pb2.WatchJobRequest, timeout: float) -> Iterator[learner_pb2.JobProgress]:
        job = request.job_id
        if job == self.stop_job and job not in self.resumed:
            yield learner_pb2.JobProgress(job_id=job, env_frames=self.at, state=learner_pb2.JOB_STATE_RUNNING)
            self.run.stop_requested.set()  # StopRun while the job trains
            yield learner_pb2.JobProgress(job_id=job, env_frames=self.at + 100, state=learner_pb2.JOB_STATE_RUNNING)
        yield from super().WatchJob(request, timeout)
        self.finished.add(job)

    def Evaluate(self, request: learner_pb2.EvaluateRequest, timeout: float) -> learner_pb2.EvaluateResponse:
        if request.job_id == self.gone_in_evaluation:
            self.gone_in_evaluation = ""
            raise Gone(grpc.StatusCode.UNAVAILABLE)
        return super().Evaluate(request, timeout)

    def StopJob(self, request: learner_pb2.StopJobRequest) -> learner_pb2.JobProgress:
        if self.lost and request.job_id in self.stopped:  # stopped once, then lost (its learner's disk went)
            raise Gone(grpc.StatusCode.NOT_FOUND)
        self.stopped.append(request.job_id)
        if request.job_id in self.finished:  # an ended job answers its last progress
            frames = self.configs[int(request.job_id[1:]) - 1].env_frames
            return learner_pb2.JobProgress(job_id=request.job_id, env_frames=frames,
                                           state=learner_pb2.JOB_STATE_SUCCEEDED)
        return learner_pb2.JobProgress(job_id=request.job_id, env_frames=CHECKPOINT,
                                       state=learner_pb2.JOB_STATE_STOPPED)


def stopped(tmp_path: Path, describe, **learner: object) -> tuple[TwoLoops, ScriptedLLM, StoppingLearner]:
    """A game run after its iterations that trains A then B (``learner``: where it stops)."""
    two, llm, _ = game_run(tmp_path, describe, ANSWER)
    fake = StoppingLearner(two.ctx.run, **learner)  # type: ignore[arg-type]
    two.ctx.stubs = Stubs(env=Env(), learner=fake, critic=None)
    return two, llm, fake


def resumed(two: TwoLoops, describe, learner: StoppingLearner) -> tuple[TwoLoops, ScriptedLLM]:
    """The run resumed from its directory (``rlgpt run --resume``) with a new planner's fast agent: the trainings
    under way settled, as execute() does first, then the step after the iterations."""
    run_dir, llm, library = two.ctx.run.dir, ScriptedLLM(ANSWER), SkillLibrary(two.ctx.run.dir.parent / "lib.json")
    again = TwoLoops(Run.resume(run_dir), RunState.load(run_dir), describe, None, library,
                     Stubs(env=Env(), learner=learner, critic=None), SETTINGS)
    again.attempts.fast = FastAgent(llm, Env(), describe, library, seed=again.ctx.seed, protocol=again.ctx.protocol)
    settle_trainings(again.ctx)
    again._keep_plan()
    return again, llm


def test_b_stopped_after_its_config_arrived_goes_on_with_that_config_and_its_job(tmp_path: Path, describe) -> None:
    two, llm, learner = stopped(tmp_path, describe, stop_job="j2")
    with pytest.raises(StopRequested):
        two._keep_plan()
    assert len(llm.prompts) == 1 and two.state.game_controller is not None and two.state.kept_plan is None
    again, llm_again = resumed(two, describe, learner)
    assert llm_again.prompts == []  # no second call for B's config
    assert len(list((again.ctx.run.dir / "llm").glob("*kept_plan-fast.json"))) == 1  # one answer on record
    a, b, go_on = learner.starts
    assert not a.resume_job_id and not b.resume_job_id and go_on.resume_job_id == "j2"  # the same job, not a new one
    assert b.config.env_frames == B_FRAMES and b.config.skills == ["crafter__kept_plan__keep_alive"]
    record = again.state.kept_plan
    assert record["job_id"] == "j2" and record["config_by"] == "fast agent" and record["resumed"] == B_RESUMED
    assert record["frames"] == B_FRAMES + SPENT and record["env_frames"] == B_FRAMES
    assert again.state.frames_used == FRAMES_USED  # the frames trained before the stop counted once
    assert again.state.under_way == {} and again.state.trainings == {}
    [event] = [e for e in again.ctx.run.events if e.training.message.startswith("resumed")]
    assert event.subtask == "crafter__kept_plan" and event.training.message == B_RESUMED
    assert f"after the run's stop: {B_RESUMED}" in "\n".join(controllers_lines(again.state))
    assert game_final.chosen(again.state).chosen == game_final.CHAIN  # scored as before: 0 < the chain's 12.5


def test_a_stopped_while_it_trained_goes_on_with_its_job_and_b_is_asked_once(tmp_path: Path, describe) -> None:
    two, llm, learner = stopped(tmp_path, describe, stop_job="j1")
    with pytest.raises(StopRequested):
        two._keep_plan()
    assert llm.prompts == [] and two.state.game_controller is None  # B's config was never asked
    again, llm_again = resumed(two, describe, learner)
    assert len(llm_again.prompts) == 1  # asked once, after the resume
    _, go_on, b = learner.starts
    assert go_on.resume_job_id == "j1" and not b.resume_job_id and b.config.env_frames == B_FRAMES
    record = again.state.game_controller
    assert record["resumed"] == f"resumed from its checkpoint at {CHECKPOINT:,} of {A_FRAMES:,} frames"
    assert record["frames"] == A_FRAMES + SPENT and "resumed" not in again.state.kept_plan
    assert again.state.frames_used == FRAMES_USED


def test_an_answer_that_arrived_before_the_learner_went_away_is_not_asked_again(tmp_path: Path, describe) -> None:
    two, llm, learner = stopped(tmp_path, describe, unavailable=2)  # B's job cannot start: the run pauses
    with pytest.raises(grpc.RpcError):
        two._keep_plan()
    assert len(llm.prompts) == 1 and two.state.under_way["crafter__kept_plan"]["answer"]["skill_max_steps"] == 8
    again, llm_again = resumed(two, describe, learner)
    assert llm_again.prompts == [] and [s.resume_job_id for s in learner.starts] == ["", "", ""]
    record = again.state.kept_plan
    assert record["resumed"] == "its config from before the stop" and record["macro_actions"] == [
        "crafter__kept_plan__keep_alive"] and learner.configs[-1].skill_max_steps == 8


def test_a_job_the_learner_lost_is_trained_again_on_what_it_left(tmp_path: Path, describe) -> None:
    two, _, learner = stopped(tmp_path, describe, stop_job="j2", lost=True)
    with pytest.raises(StopRequested):
        two._keep_plan()
    again, llm_again = resumed(two, describe, learner)
    assert llm_again.prompts == [] and learner.configs[-1].env_frames == B_FRAMES - AT  # what the lost job left
    record = again.state.kept_plan
    assert record["resumed"].startswith("a new job trained: the stopped one could not resume")
    assert record["frames"] == B_FRAMES + SPENT and again.state.frames_used == FRAMES_USED


def test_a_job_that_had_finished_is_evaluated_without_training_or_a_second_curve_point(tmp_path: Path,
                                                                                      describe) -> None:
    two, _, learner = stopped(tmp_path, describe, gone_in_evaluation="j2")  # B trained, its evaluation failed
    with pytest.raises(grpc.RpcError):
        two._keep_plan()
    assert two.state.subtasks["crafter__kept_plan"].curve  # its final point, watched before the pause
    two.ctx.save()  # with it on record (a save after the watch: the resumed watch must not add it again)
    again, llm_again = resumed(two, describe, learner)
    assert llm_again.prompts == [] and len(learner.starts) == 2  # no StartTraining: the job had finished
    record = again.state.kept_plan
    assert record["job_id"] == "j2" and "score" in record
    assert record["resumed"] == f"finished its {B_FRAMES:,} frames before the stop, its config from before the stop"
    assert record["frames"] == B_FRAMES + SPENT and again.state.frames_used == FRAMES_USED  # counted once
    curve = again.state.subtasks["crafter__kept_plan"].curve
    assert [(p["job_id"], p["training_frames"]) for p in curve] == [("j2", B_FRAMES)]  # its final point once


def test_a_lost_job_with_too_few_frames_left_trains_no_new_job(tmp_path: Path, describe) -> None:
    at = B_FRAMES - trainings.MIN_FRAMES + 1  # what the lost job left is under a training's minimum
    two, _, learner = stopped(tmp_path, describe, stop_job="j2", lost=True, at=at)
    with pytest.raises(StopRequested):
        two._keep_plan()
    evaluations = len(learner.evaluations)
    again, _ = resumed(two, describe, learner)
    assert len(learner.starts) == 2 and len(learner.evaluations) == evaluations  # no new job, nothing evaluated
    record = again.state.kept_plan
    error = f"the learner lost job j2 after {at:,} of {B_FRAMES:,} frames; too few frames left to train again"
    assert record["error"] == f"NOT_FOUND: {error}" and "score" not in record and record["frames"] == at
    assert again.state.subtasks["crafter__kept_plan"].last_error == error and again.state.under_way == {}
