"""The learner's jobs: start, resume, stop, watch, recover after a restart, and the watchdog."""

from __future__ import annotations

import dataclasses
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rlgpt import metrics
from rlgpt.errors import FailedPrecondition, NotFound, ResourceExhausted, found, shown
from rlgpt.v1 import learner_pb2
from services.learner.frame_budget import frames_touched
from services.learner.job_watch import ENV_SERVER_LOST, LEARNER_GONE, REASONS, touch_heartbeat
from services.learner.jobs import (
    JobRecord,
    JobRunner,
    LocalRunner,
    last_error,
    prepare_job_dir,
    read_progress,
    wait_for_exit,
)
from services.learner.settings import LearnerSettings

log = logging.getLogger(__name__)
TERMINAL = {learner_pb2.JOB_STATE_SUCCEEDED, learner_pb2.JOB_STATE_FAILED, learner_pb2.JOB_STATE_STOPPED}


class JobManager:
    """Owns every job of one run directory; a monitor thread polls the running ones."""

    def __init__(self, settings: LearnerSettings, runners: dict[str, JobRunner] | None = None,
                 poll_seconds: float = 0.5):
        self.settings = settings
        self.root = Path(settings.run_dir).resolve() / "jobs"
        self.root.mkdir(parents=True, exist_ok=True)
        self.runners: dict[str, JobRunner] = runners or {"local": LocalRunner()}
        self._jobs: dict[str, JobRecord] = {}
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._gauged: set[str] = set()  # jobs with per-job series on /metrics
        self._recover()
        self._stop = threading.Event()
        self._poll_seconds = poll_seconds
        self._monitor = threading.Thread(target=self._monitor_loop, daemon=True, name="job-monitor")
        self._monitor.start()

    # --- lifecycle ----------------------------------------------------------------------------------
    def _recover(self) -> None:
        """Lists jobs found on disk; one that was running when the learner died ends as its final record says (a
        job whose learner is gone saves a checkpoint and exits: FAILED with that reason, resumable)."""
        for job_dir in sorted(p for p in self.root.iterdir() if (p / "state.json").exists()):
            try:
                record = JobRecord.load(job_dir)
            except Exception as exc:
                log.error("skipping job directory %s: %s", job_dir, exc)
                continue
            if record.state not in TERMINAL:
                runner = self.runners.get(record.config.runner or "local")
                record.handle = runner.reattach(record.job_id, job_dir) if runner else None
                if record.handle is None:
                    record.state, record.message = self._outcome(record, None)
                    record.save()
            self._jobs[record.job_id] = record
        self._update_gauges()

    def close(self) -> None:
        """Stops the monitor; running local jobs are asked to stop and checkpoint."""
        self._stop.set()
        with self._lock:
            running = [j for j in self._jobs.values() if j.state not in TERMINAL]
        for job in running:
            try:
                self.stop(job.job_id, wait=False)
            except (NotFound, FailedPrecondition):
                pass

    # --- commands -----------------------------------------------------------------------------------
    def start(self, config: learner_pb2.RLConfig, extra: dict[str, Any],
              prepare: Callable[[Path], None] | None = None) -> JobRecord:
        """Creates a job and launches it; ``prepare`` (given its new directory) readies it first (e.g. the
        checkpoint it starts from)."""
        with self._lock:
            running = sum(1 for j in self._jobs.values() if j.state not in TERMINAL)
            if running >= self.settings.max_concurrent_jobs:
                raise ResourceExhausted(f"{running} jobs are running, the learner's limit "
                                        f"({self.settings.max_concurrent_jobs}); stop one or wait")
            job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
            job_dir = self.root / job_id
            job_dir.mkdir(parents=True)
            prepare_job_dir(job_dir, config, extra)
            record = JobRecord(job_id=job_id, job_dir=job_dir, config=config)
            self._jobs[job_id] = record
            try:
                if prepare is not None:
                    prepare(job_dir)
                self._launch(record)
            except Exception:  # no job id reached the client: leave no job behind to hold a slot
                del self._jobs[job_id]
                shutil.rmtree(job_dir, ignore_errors=True)
                raise
            return record

    def resume(self, job_id: str, extra: dict[str, Any], check: Callable[[Path], None] | None = None) -> JobRecord:
        """Launches a stopped or failed job again from its checkpoint; ``check`` (given the job directory, once the
        job is known not to run) may refuse it first."""
        with self._lock:
            record = self.get(job_id)
            if record.state not in (learner_pb2.JOB_STATE_STOPPED, learner_pb2.JOB_STATE_FAILED):
                raise FailedPrecondition(f"job {job_id} is {learner_pb2.JobState.Name(record.state)}; only a stopped "
                                         "or failed job can resume")
            if check is not None:
                check(record.job_dir)
            prepare_job_dir(record.job_dir, record.config, extra)
            record.resumes += 1
            try:
                self._launch(record)
            except Exception as exc:  # still resumable, and no longer counted as running
                record.state, record.message = learner_pb2.JOB_STATE_FAILED, f"could not launch: {exc}"
                record.save()
                raise
            return record

    def _launch(self, record: JobRecord) -> None:
        runner = self.runners.get(record.config.runner or "local")
        if runner is None:
            raise FailedPrecondition(f"runner {shown(record.config.runner)} is not configured on this learner")
        record.state = learner_pb2.JOB_STATE_PENDING
        record.message = f"launching on {runner.name}"
        record.started_at = time.time()
        record.error_noticed_at = 0.0
        record.save()
        touch_heartbeat(record.job_dir)
        record.handle = runner.launch(record.job_id, record.job_dir, record.config)
        record.state = learner_pb2.JOB_STATE_RUNNING
        record.message = f"running ({record.handle.describe()})"
        record.save()
        self._notify()
        log.info("job %s: %s", record.job_id, record.message)

    def stop(self, job_id: str, wait: bool = True) -> JobRecord:
        with self._lock:
            record = self.get(job_id)
            if record.state in TERMINAL:
                return record
            (record.job_dir / "stop").touch()
            handle = record.handle
        if handle is not None and wait and wait_for_exit(handle, self.settings.stop_grace_seconds) is None:
            handle.kill()
        with self._lock:
            if (handle is None or not wait) and handle is not None:
                handle.kill()
            record.state = learner_pb2.JOB_STATE_STOPPED
            record.message = "stopped on request; StartTraining with resume_job_id continues from its checkpoint"
            record.save()
            self._notify()
        return record

    def get(self, job_id: str) -> JobRecord:
        with self._lock:
            return found(self._jobs.get(job_id), f"no job {shown(job_id)}; ListJobs shows the known jobs")

    def all(self) -> list[JobRecord]:
        with self._lock:
            return sorted(self._jobs.values(), key=lambda j: j.job_id, reverse=True)

    def remove(self, job_id: str) -> None:
        with self._lock:
            record = self._jobs.pop(job_id)
        shutil.rmtree(record.job_dir, ignore_errors=True)

    # --- progress -----------------------------------------------------------------------------------
    def progress(self, record: JobRecord) -> learner_pb2.JobProgress:
        records = read_progress(record.job_dir)
        last = records[-1] if records else {}
        return learner_pb2.JobProgress(
            job_id=record.job_id, state=record.state, env_frames=int(last.get("env_frames", 0)),
            fps=float(last.get("fps", 0.0)), mean_return=float(last.get("mean_return", 0.0)),
            success_rate=float(last.get("success_rate", 0.0)), policy_lag=float(last.get("policy_lag", 0.0)),
            elapsed_seconds=float(last.get("elapsed", 0.0)), episodes=int(last.get("episodes", 0)),
            message=record.message, skill_frame_fraction=float(last.get("skill_frame_fraction", 0.0)),
            skill_errors=int(last.get("skill_errors", 0)),
            action_shares={str(k): float(v) for k, v in (last.get("action_shares") or {}).items()})

    def watch(self, job_id: str, is_active: Callable[[], bool]) -> Iterator[learner_pb2.JobProgress]:
        """Yields a progress record whenever a new one appears or the state changes, until the job ends."""
        record = self.get(job_id)
        seen_lines, seen_state = -1, None
        while is_active():
            lines = len(read_progress(record.job_dir))
            if lines != seen_lines or record.state != seen_state:
                seen_lines, seen_state = lines, record.state
                yield self.progress(record)
                if record.state in TERMINAL:
                    return
            with self._changed:
                self._changed.wait(timeout=self._poll_seconds)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()
        self._update_gauges()

    def _update_gauges(self) -> None:
        counts = {name: 0 for name in learner_pb2.JobState.keys()}  # noqa: SIM118 - protobuf enum wrapper
        for job in list(self._jobs.values()):
            counts[learner_pb2.JobState.Name(job.state)] += 1
            running = job.state == learner_pb2.JOB_STATE_RUNNING
            if running or job.job_id in self._gauged:
                # Alerts need to tell a running job from a finished one (whose frames also stay flat).
                self._gauged.add(job.job_id)
                metrics.LEARNER_JOB_RUNNING.labels(job.job_id).set(1 if running else 0)
                if not running:
                    metrics.LEARNER_FPS.labels(job.job_id).set(0)
        for name, count in counts.items():
            metrics.LEARNER_JOBS.labels(name.removeprefix("JOB_STATE_").lower()).set(count)

    # --- monitor ------------------------------------------------------------------------------------
    def _monitor_loop(self) -> None:
        while not self._stop.wait(self._poll_seconds):
            for record in [j for j in self.all() if j.state == learner_pb2.JOB_STATE_RUNNING]:
                try:
                    self._check(record)
                except Exception:
                    log.exception("monitoring job %s failed", record.job_id)
            with self._changed:
                self._changed.notify_all()

    def _check(self, record: JobRecord) -> None:
        progress = read_progress(record.job_dir)
        if progress:
            last = progress[-1]
            job = record.job_id
            metrics.LEARNER_FPS.labels(job).set(last["fps"])
            metrics.LEARNER_FRAMES.labels(job).set(last["env_frames"])
            metrics.LEARNER_RETURN.labels(job).set(last["mean_return"])
            metrics.LEARNER_SUCCESS.labels(job).set(last["success_rate"])
        handle = record.handle
        code = handle.poll() if handle is not None else 1
        if code is None:
            touch_heartbeat(record.job_dir)  # this learner still watches the job (job_watch)
        error_file = record.job_dir / "error.json"
        if code is None and error_file.exists():
            # The env diagnosed a fatal error: the job checkpoints and exits by itself (job_watch); past the
            # grace, it is killed (Sample Factory can wait forever for a dead worker).
            noticed = record.error_noticed_at = record.error_noticed_at or time.time()
            if time.time() - noticed > 2 * self.settings.stop_grace_seconds:
                handle.kill()
                code = handle.poll() if handle.poll() is not None else 1
            else:
                return
        if code is None:
            # Progress: a record from the training (written after policy updates) or frames its envs counted
            # since (a first batch of slow macro-action decisions can take minutes before any update).
            last_time = max(progress[-1]["time"] if progress else record.started_at,
                            frames_touched(record.job_dir) or 0.0)
            if time.time() - last_time > self.settings.watchdog_seconds:
                handle.kill()
                metrics.LEARNER_WATCHDOG_KILLS.inc()
                self._finish(record, learner_pb2.JOB_STATE_FAILED,
                             f"no progress for {self.settings.watchdog_seconds:.0f} s: killed by the watchdog. "
                             f"Last error: {last_error(record.job_dir) or 'none recorded'}")
            return
        self._finish(record, *self._outcome(record, code))

    @staticmethod
    def _outcome(record: JobRecord, code: int | None) -> tuple[int, str]:
        """State and message of a job whose training ended, by its final progress record, the job's own word (a
        Kubernetes Job cleaned up after success polls as "failed"), else by its exit ``code`` (None: unknown, the
        learner that watched it died)."""
        progress = read_progress(record.job_dir)
        final = progress[-1] if progress and progress[-1].get("final") else {}
        if final.get("reason") == "budget":
            return learner_pb2.JOB_STATE_SUCCEEDED, (f"trained {final.get('env_frames', 0)} frames; "
                                                     f"success rate {final.get('success_rate', 0):.2f}")
        if final.get("reason") == "stopped":
            return learner_pb2.JOB_STATE_STOPPED, "stopped on request; resumable"
        resume = "resume it with StartTraining(resume_job_id) once the cause is fixed"
        if final.get("reason") in REASONS:
            why = (last_error(record.job_dir) if final["reason"] == ENV_SERVER_LOST
                   else "the learner that watched it was gone")
            return learner_pb2.JOB_STATE_FAILED, (f"{final['reason']}: {why}; the job saved a checkpoint at "
                                                  f"{final.get('env_frames', 0)} frames and exited; {resume}")
        if code is None:
            return learner_pb2.JOB_STATE_FAILED, (f"{LEARNER_GONE}: the learner that watched it died and the job left "
                                                  f"no final record; {resume} (from its last checkpoint)")
        return learner_pb2.JOB_STATE_FAILED, (f"training exited with code {code}: "
                                              f"{last_error(record.job_dir) or 'no error recorded'}")

    def _finish(self, record: JobRecord, state: int, message: str) -> None:
        with self._lock:
            if record.state in TERMINAL:
                return
            # The file first: a watcher that sees the final state in memory may read state.json at once.
            dataclasses.replace(record, state=state, message=message).save()
            record.state, record.message = state, message
        log.info("job %s %s: %s", record.job_id, learner_pb2.JobState.Name(state), message[:300])
        self._notify()
