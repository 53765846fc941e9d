"""Step 2 of an RL attempt: its config trained by the learner (StartTraining, waiting for a slot while the learner
is busy; or a job of it that stopped with the run resumed, :class:`Resume`), watched to its end (progress emitted,
on the sub-task's curve, its frames spent), then the policy evaluated. Runs in a thread of its own next to other
sub-tasks' trainings: it only emits, records on its own sub-task, spends and saves, all thread-safe."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from rlgpt import deadlines, worlds
from rlgpt.errors import FailedPrecondition
from rlgpt.v1 import learner_pb2, learner_pb2_grpc, planner_pb2
from services.planner.context import RunContext, StopRequested
from services.planner.controller import evaluation_seconds
from services.planner.state import Decision, SubTaskState, TestRecord

log = logging.getLogger(__name__)
LEARNER_BUSY_SECONDS = 2.0
"""How long a training waits before asking again a learner that runs as many jobs as it may."""
MIN_FRAMES = 5_000
"""Fewer frames than this for a training: none is made (it would not learn anything). The one bar for every
training the planner starts: a final-controller candidate, RL around a kept plan, a new job where the learner lost
a stopped one."""


@dataclasses.dataclass
class Trained:
    """What step 2 of an RL attempt produced: the job, its curve (frames of that training) and its evaluation."""

    job_id: str
    curve: list[dict[str, Any]]
    evaluation: learner_pb2.EvaluateResponse
    asked: learner_pb2.EvaluateRequest
    """The evaluation's request (its worlds: seed, episodes)."""


def learner_of(ctx: RunContext, st: planner_pb2.SubTask) -> learner_pb2_grpc.LearnerServiceStub:
    """The run's learner; FailedPrecondition where the planner has none."""
    if ctx.stubs.learner is None:
        raise FailedPrecondition(f"{st.name} needs training and this planner has no learner")
    return ctx.stubs.learner


@dataclasses.dataclass
class Resume:
    """A training stopped with its run, to go on with: its job, continued from its latest checkpoint to its own
    frame budget rather than started again from frame 0."""

    job_id: str
    spent: int = 0
    """Frames counted of the training so far: a new job, where the learner lost this one, trains the rest."""
    said: str = ""
    """More for the event that says the job resumed (e.g. its config from before the stop)."""
    at: learner_pb2.JobProgress | None = None
    """Set by the training: where the job stood when it resumed; None when the learner could not resume it."""
    message: str = ""
    """Set by the training with ``at``: how the job resumed, in words (its event's message)."""


class TooFewFramesLeft(grpc.RpcError):
    """A stopped job the learner lost or cannot resume, with fewer than :data:`MIN_FRAMES` of its frames left: no new
    job trains, the training's error (its code: the learner's answer about the job)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self._code, self._message = code, message

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._message


@dataclasses.dataclass
class Training:
    """One training of a sub-task's ``config`` and its evaluation. Once the run is stopped or ``halt`` is set
    (another training of the round failed), a job not started yet does not start and a running one is stopped
    (StopJob checkpoints it): StopRequested."""

    ctx: RunContext
    st: planner_pb2.SubTask
    state: SubTaskState
    config: learner_pb2.RLConfig
    details: dict[str, Any]
    """More for the attempt's file (its macro actions, accepted and refused)."""
    halt: threading.Event | None = None
    eval_seed: int | None = None
    """The first world of the trained policy's evaluation; None: the sub-tasks' held-out worlds."""
    resume: Resume | None = None
    """A job of this training stopped with the run (:meth:`_resume`); None: a new job."""

    def run(self, frames_per_episode: int = 0) -> Trained | None:
        """The training watched to its end, then its evaluation (``frames_per_episode``: frames asked for, for a
        critic); None where the learner refused the config (a failed attempt with that feedback)."""
        job_id = self._start()
        if not job_id:
            return None
        curve = self._watch(job_id)
        return Trained(job_id, curve, *self._evaluate(job_id, curve, frames_per_episode))

    def _halted(self) -> bool:
        return self.ctx.run.stop_requested.is_set() or (self.halt is not None and self.halt.is_set())

    def _start(self) -> str:
        """StartTraining; its job id, kept in the sub-task's state. While the learner runs as many jobs as it
        may (RESOURCE_EXHAUSTED: its max_concurrent_jobs, other runs' jobs included) it is asked again every
        :data:`LEARNER_BUSY_SECONDS`. A config the learner refuses is a failed attempt with that feedback and
        trains nothing ("")."""
        ctx, st, state, learner = self.ctx, self.st, self.state, learner_of(self.ctx, self.st)
        if self._halted():
            raise StopRequested()
        if self.resume is not None and self._resume():
            return self.resume.job_id
        ctx.run.emit(st.name, config=self.config)
        while True:
            try:
                job_id = learner.StartTraining(learner_pb2.StartTrainingRequest(config=self.config)).job_id
                break
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    log.info("%s waits for a learner slot: %s", st.name, exc.details())
                    time.sleep(LEARNER_BUSY_SECONDS)
                    if self._halted():
                        raise StopRequested() from None
                    continue
                if exc.code() == grpc.StatusCode.FAILED_PRECONDITION and self.config.init_from_job:
                    # The revised config changed the spaces: its policy cannot start from the earlier weights.
                    log.info("%s trains a fresh network: %s", st.name, exc.details())
                    self.details["init_from_job_refused"] = exc.details()
                    self.config.init_from_job = ""
                    continue
                if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    raise
                state.feedback = f"the learner refused the config: {exc.details()}"
                state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.RL,
                                        error=state.feedback, frames=state.frames))
                ctx.attempt_file(f"{st.name}_rl{state.inner_iterations}", {**self.details, "error": state.feedback})
                return ""
        state.job_id, state.policy_job = job_id, ""  # the chain runs the best evaluated policy again
        ctx.spend_training(state, job_id, 0)  # under way: a pause during it counts the rest on resume
        ctx.save()
        return job_id

    def _resume(self) -> bool:
        """The stopped job (``resume``) continued from its latest checkpoint to its own frame budget (StartTraining
        with resume_job_id; one that had reached its budget is only watched and evaluated), the frames its learner
        reports for it so far counted once (the resumed run counted them when it settled the job). False where the
        learner no longer knows the job or cannot resume it: a new job trains what the stopped one left, unless that
        is under :data:`MIN_FRAMES` (:class:`TooFewFramesLeft`, recorded on the sub-task)."""
        ctx, st, state, learner, resume = self.ctx, self.st, self.state, learner_of(self.ctx, self.st), self.resume
        assert resume is not None
        try:  # where the job stands: StopJob answers a stopped or ended job as it is
            at = learner.StopJob(learner_pb2.StopJobRequest(job_id=resume.job_id))
            if at.state != learner_pb2.JOB_STATE_SUCCEEDED:
                learner.StartTraining(learner_pb2.StartTrainingRequest(config=self.config,
                                                                       resume_job_id=resume.job_id))
        except grpc.RpcError as exc:
            if exc.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                raise
            self.details["resume_refused"] = f"{exc.code().name}: {exc.details()}"
            if self.config.env_frames - resume.spent < MIN_FRAMES:  # a new job would not learn anything
                lost = "lost" if exc.code() == grpc.StatusCode.NOT_FOUND else "could not resume"
                error = (f"the learner {lost} job {resume.job_id} after {resume.spent:,} of "
                         f"{self.config.env_frames:,} frames; too few frames left to train again")
                log.warning("%s: %s (%s)", st.name, error, exc.details())
                state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.RL, error=error,
                                        frames=state.frames, job_id=resume.job_id))
                raise TooFewFramesLeft(exc.code(), error) from exc
            log.warning("%s: job %s cannot resume (%s); a new job trains", st.name, resume.job_id, exc.details())
            self.config.env_frames -= resume.spent
            return False
        state.job_id, state.policy_job = resume.job_id, ""
        ctx.resume_training(state, resume.job_id, at.env_frames)
        where = (f"finished its {at.env_frames:,} frames before the stop" if at.state == learner_pb2.JOB_STATE_SUCCEEDED
                 else f"resumed from its checkpoint at {at.env_frames:,} of {self.config.env_frames:,} frames")
        resume.at, resume.message = at, ", ".join(part for part in (where, resume.said) if part)
        log.info("%s: job %s %s", st.name, resume.job_id, resume.message)
        ctx.run.emit(st.name, training=learner_pb2.JobProgress(job_id=resume.job_id, state=at.state,
                                                                env_frames=at.env_frames, message=resume.message))
        ctx.save()
        return True

    def _watch(self, job_id: str) -> list[dict[str, Any]]:
        """The job's progress to its end: emitted, on the sub-task's curve (on the frames the sub-task had spent
        by then), its frames spent as they are reported (a run paused by a service that died mid-training, or a
        planner killed then, still counts what its events show). A resumed job's points already on the curve (it
        was watched to its end before the stop) are not added again. A stop (or ``halt``) stops the job; a job that
        did not succeed is a FailedPrecondition (the run pauses)."""
        ctx, st, state, learner = self.ctx, self.st, self.state, learner_of(self.ctx, self.st)
        curve: list[dict[str, Any]] = []
        final = None
        # The sub-task's frames before this training (a resumed job reports its frames from its start).
        before = state.frames - (self.resume.at.env_frames if self.resume and self.resume.at else 0)
        watching = deadlines.training_seconds(self.config.env_frames)
        for progress in learner.WatchJob(learner_pb2.WatchJobRequest(job_id=job_id), timeout=watching):
            if self._halted():
                learner.StopJob(learner_pb2.StopJobRequest(job_id=job_id))
                raise StopRequested()
            curve.append({"env_frames": progress.env_frames, "success_rate": progress.success_rate,
                          "mean_return": progress.mean_return, "skill_frame_fraction": progress.skill_frame_fraction})
            ctx.spend_training(state, job_id, progress.env_frames)
            ctx.run.emit(st.name, training=progress)
            ctx.save()  # the frames its event shows are in the state too
            final = progress
        ctx.spend_training(state, job_id, final.env_frames if final else 0, ended=True)
        if curve and final is not None and final.action_shares:  # what the policy chose by the end: once
            curve[-1]["action_shares"] = dict(final.action_shares)
        known = {p.get("training_frames") for p in state.curve if p.get("job_id") == job_id}  # resumed: seen
        state.curve.extend({**point, "env_frames": before + point["env_frames"], "training_frames": point["env_frames"],
                            "job_id": job_id, "iteration": ctx.state.outer_iteration}
                           for point in curve if point["env_frames"] not in known)
        if final is None or final.state != learner_pb2.JOB_STATE_SUCCEEDED:
            message = final.message if final else "no progress"
            state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.RL, error=message,
                                    frames=state.frames, job_id=job_id))
            raise FailedPrecondition(f"training of {st.name} (job {job_id}) did not finish: {message}; resume with "
                                     "--resume once the failed service is back")
        return curve

    def _evaluate(self, job_id: str, curve: list[dict[str, Any]], frames_per_episode: int
                  ) -> tuple[learner_pb2.EvaluateResponse, learner_pb2.EvaluateRequest]:
        """The trained policy's evaluation, recorded (a TestRecord, the attempt's file), and its request."""
        ctx, st, state = self.ctx, self.st, self.state
        asked = learner_pb2.EvaluateRequest(job_id=job_id, episodes=ctx.budgets.eval_episodes,
                                            seed=worlds.held_out_worlds(ctx.seed) if self.eval_seed is None
                                            else self.eval_seed,
                                            frames_per_episode=frames_per_episode,
                                            episode_length=ctx.episode_cap() if ctx.game else 0)
        evaluation = learner_of(ctx, st).Evaluate(asked, timeout=evaluation_seconds(ctx, asked,
                                                                                    self.config.episode_length))
        if ctx.game:  # a game task counts its whole spend, evaluations too (services/planner/game_task.py)
            ctx.spend(state, sum(e.steps for e in evaluation.episodes))
            ctx.note_episodes(e.steps for e in evaluation.episodes)
        state.record(TestRecord(iteration=ctx.state.outer_iteration, kind=Decision.RL, job_id=job_id,
                                success_rate=evaluation.success_rate, frames=state.frames))
        ctx.attempt_file(f"{st.name}_rl{state.inner_iterations}", {
            **self.details, "job_id": job_id, "env_frames": self.config.env_frames, "curve": curve,
            "evaluation_success_rate": evaluation.success_rate})
        return evaluation, asked


def settle_trainings(ctx: RunContext) -> None:
    """The trainings a run was watching when it paused (its learner or its planner died, a stop came during one):
    each is stopped (StopJob checkpoints a job that still runs; an ended one answers its last progress), its last
    progress emitted and the frames it spent after the run's last count counted on its sub-task, so that a resumed
    run counts every frame its trainings spent. The paused attempt itself is redone."""
    for job_id, under_way in list(ctx.state.trainings.items()):
        state = ctx.state.subtasks.get(str(under_way.get("subtask", "")))
        if state is None or ctx.stubs.learner is None:
            del ctx.state.trainings[job_id]
            continue
        try:
            final = ctx.stubs.learner.StopJob(learner_pb2.StopJobRequest(job_id=job_id))
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise
            log.warning("job %s of %s is unknown to the learner: its frames since the pause are not counted",
                        job_id, state.name)
            del ctx.state.trainings[job_id]
            continue
        ctx.run.emit(state.name, training=final)
        ctx.spend_training(state, job_id, final.env_frames, ended=True)
        log.info("job %s of %s, under way when the run paused: %d frames in all", job_id, state.name,
                 final.env_frames)
    ctx.save()


def run_trainings(attempts: list[Any], train_and_evaluate: Callable[[Any, threading.Event], None],
                  parallel: int) -> None:
    """A round's trainings and evaluations in threads, at most ``parallel`` at once (1: one after another). After
    StopRun every thread stops its job (StopJob) and the round ends in StopRequested; a training that fails halts
    the others (their jobs are stopped, the ones not started do not start) and its error is raised once every
    thread has ended, so no job is left running unwatched."""
    halt = threading.Event()

    def train(attempt: Any) -> None:
        try:
            train_and_evaluate(attempt, halt)
        except BaseException:
            halt.set()
            raise

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(attempts))), thread_name_prefix="training") as pool:
        futures = [pool.submit(train, attempt) for attempt in attempts]
        errors = [e for e in (f.exception() for f in futures) if e is not None]
    if errors:  # the failure that halted the round, rather than the stops it caused
        raise next((e for e in errors if not isinstance(e, StopRequested)), errors[0])
