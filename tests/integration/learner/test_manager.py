"""JobManager with the real local runner: each job is a real subprocess in its own process group.

Only the training program is replaced (``train_command`` points at ``SCRIPT``): a few lines that speak the
training process's file protocol (``progress.jsonl``, ``error.json``, the ``stop`` file, exit codes) as
``services.learner.train`` does, so start, stop, resume, failure, the watchdog and recovery run in
well under a second each instead of a full Sample Factory training.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlgpt.errors import FailedPrecondition, NotFound, ResourceExhausted, Unavailable
from rlgpt.v1 import learner_pb2
from services.learner import jobs
from services.learner.jobs import JobHandle, JobRecord, LocalRunner
from services.learner.manager import TERMINAL, JobManager
from services.learner.settings import LearnerSettings

SCRIPT = r'''
import json, os, subprocess, sys, time
from pathlib import Path
job = Path(sys.argv[1])
doc = json.loads((job / "config.json").read_text())
what = doc["behaviour"]
frames = 0

def record(final=False, reason=""):
    global frames
    frames += 100
    line = {"time": time.time(), "elapsed": 0.1, "env_frames": frames, "fps": 1000.0, "episodes": frames // 100,
            "mean_return": 0.5, "success_rate": 0.5, "policy_lag": 1.0, "skill_frame_fraction": 0.25,
            "skill_errors": 2, "final": final, "reason": reason}
    with (job / "progress.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")

if what == "env":
    (job / "env.json").write_text(json.dumps({"pid": os.environ.get("RLGPT_LEARNER_PID"), "cwd": os.getcwd(),
                                              "pythonpath": os.environ.get("PYTHONPATH", "")}))
    print("hello from training", flush=True)
if what in ("budget", "env"):
    record(); record(); record(final=True, reason="budget")
    sys.exit(0)
if what in ("until_stop", "heartbeat"):
    while not (job / "stop").exists():
        record()
        time.sleep(0.05)
    record(final=True, reason="stopped")
    sys.exit(0)
if what == "crash":
    record()
    print("Traceback (most recent call last):\n  File 'x.py', line 1\nRuntimeError: the learner broke", flush=True)
    sys.exit(1)
if what == "error_json":  # a job hung on its dead rollout worker
    record()
    (job / "error.json").write_text(json.dumps({"message": "env server at 10.0.0.1:1 is gone"}))
    time.sleep(600)
if what == "error_json_exits":  # what services.learner.train does: checkpoint, final record, exit
    record()
    (job / "error.json").write_text(json.dumps({"message": "env server at 10.0.0.1:1 is gone"}))
    time.sleep(0.3)
    record(final=True, reason="env_server_lost")
    sys.exit(3)
if what == "ignore_stop":  # a child in the same process group: killing the job must end it too
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (job / "child.pid").write_text(str(child.pid))
    while True:
        record()
        time.sleep(0.05)
if what == "hang":
    time.sleep(600)
if what == "slow_first_batch":  # envs step (their frame counters move) long before the first policy update
    (job / "frames").mkdir(exist_ok=True)
    for step in range(1, 16):
        (job / "frames" / "worker0-0").write_text(str(100 * step))
        time.sleep(0.1)
    record(); record(final=True, reason="budget")
    sys.exit(0)
'''


@pytest.fixture(autouse=True)
def fake_training(monkeypatch) -> None:
    monkeypatch.setattr(jobs, "train_command", lambda job_dir, module: ["python", "-c", SCRIPT, str(job_dir)])


@pytest.fixture
def make_manager(tmp_path: Path) -> Iterator[Any]:
    made: list[JobManager] = []

    def make(runners: dict[str, jobs.JobRunner] | None = None, **overrides: Any) -> JobManager:
        fields = dict(run_dir=str(tmp_path), watchdog_seconds=30.0, stop_grace_seconds=10.0, max_concurrent_jobs=4)
        manager = JobManager(LearnerSettings(**{**fields, **overrides}), runners, poll_seconds=0.05)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close()
        for record in manager.all():
            if record.handle is not None:
                record.handle.kill()


def config(**fields: Any) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(name="wood", env_frames=300, num_workers=1, envs_per_worker=2, **fields)


def wait_done(manager: JobManager, job_id: str, timeout: float = 20) -> list[learner_pb2.JobProgress]:
    deadline = time.monotonic() + timeout
    progress = list(manager.watch(job_id, lambda: time.monotonic() < deadline))
    assert progress and progress[-1].state in TERMINAL, f"job {job_id} did not end in {timeout} s"
    return progress


def process_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_job_runs_and_succeeds_at_its_budget(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "budget", "env_server": "127.0.0.1:1"})
    assert record.state == learner_pb2.JOB_STATE_RUNNING and record.message.startswith("running (local pid ")
    saved = json.loads((record.job_dir / "config.json").read_text())
    assert saved["config"]["env_frames"] == "300" and saved["env_server"] == "127.0.0.1:1"
    assert json.loads(record.state_path.read_text())["state"] == "JOB_STATE_RUNNING"
    progress = wait_done(manager, record.job_id)
    final = progress[-1]
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED
    assert final.message == "trained 300 frames; success rate 0.50"
    assert (final.env_frames, final.episodes, final.fps, final.skill_errors) == (300, 3, 1000.0, 2)
    assert final.skill_frame_fraction == 0.25 and final.policy_lag == 1.0 and final.mean_return == 0.5
    assert json.loads(record.state_path.read_text())["state"] == "JOB_STATE_SUCCEEDED"
    assert [r.job_id for r in manager.all()] == [record.job_id]


def test_the_local_runner_starts_training_in_the_project_with_the_learners_pid(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "env"})
    wait_done(manager, record.job_id)
    seen = json.loads((record.job_dir / "env.json").read_text())
    project = str(Path(jobs.__file__).resolve().parents[2])
    assert seen["pid"] == str(os.getpid())  # the job ends itself if this learner dies
    assert seen["cwd"] == project and seen["pythonpath"].split(os.pathsep)[0] == project
    assert "hello from training" in (record.job_dir / "train.log").read_text()


def test_a_crash_fails_the_job_with_its_traceback(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "crash"})
    final = wait_done(manager, record.job_id)[-1]
    assert final.state == learner_pb2.JOB_STATE_FAILED
    assert final.message.startswith("training exited with code 1: Traceback")
    assert "RuntimeError: the learner broke" in final.message


def test_a_job_hung_after_the_error_it_diagnosed_is_killed_after_the_grace(make_manager) -> None:
    manager = make_manager(stop_grace_seconds=0.5)
    start = time.monotonic()
    record = manager.start(config(), {"behaviour": "error_json"})
    final = wait_done(manager, record.job_id)[-1]
    assert 1.0 <= time.monotonic() - start < 10  # twice the grace, not the 600 s the process would wait
    assert final.state == learner_pb2.JOB_STATE_FAILED and "env server at 10.0.0.1:1 is gone" in final.message
    assert record.handle.poll() is not None


def test_a_job_that_stopped_itself_says_why_and_that_it_can_resume(make_manager) -> None:
    manager = make_manager(stop_grace_seconds=30)
    record = manager.start(config(), {"behaviour": "error_json_exits"})
    final = wait_done(manager, record.job_id)[-1]
    assert final.state == learner_pb2.JOB_STATE_FAILED and record.handle.poll() == 3
    assert final.message.startswith("env_server_lost: env server at 10.0.0.1:1 is gone")
    assert "saved a checkpoint at 200 frames" in final.message and "resume_job_id" in final.message


def test_the_learner_marks_the_jobs_it_watches(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "heartbeat"})
    wait_for_progress(record)
    heartbeat = record.job_dir / "learner_heartbeat"
    first = heartbeat.stat().st_mtime
    deadline = time.monotonic() + 5
    while heartbeat.stat().st_mtime == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert heartbeat.stat().st_mtime > first  # touched again while the job runs (job_watch reads it)
    manager.stop(record.job_id)


def test_the_watchdog_kills_a_job_without_progress(make_manager) -> None:
    manager = make_manager(watchdog_seconds=0.5)
    record = manager.start(config(), {"behaviour": "hang"})
    final = wait_done(manager, record.job_id)[-1]
    assert final.state == learner_pb2.JOB_STATE_FAILED
    assert final.message.startswith("no progress for 0 s: killed by the watchdog. Last error: none recorded")
    assert record.handle.poll() is not None


def test_a_job_whose_envs_step_before_its_first_update_is_not_killed(make_manager) -> None:
    manager = make_manager(watchdog_seconds=0.5)  # 1.5 s of env steps with no progress record: frames count
    record = manager.start(config(), {"behaviour": "slow_first_batch"})
    final = wait_done(manager, record.job_id)[-1]
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED, final.message


def test_stop_asks_politely_and_the_job_ends_resumable(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "until_stop"})
    wait_for_progress(record)
    stopped = manager.stop(record.job_id)
    assert stopped.state == learner_pb2.JOB_STATE_STOPPED and "resume_job_id" in stopped.message
    assert record.handle.poll() == 0  # it ended by itself, after its final record
    assert jobs.read_progress(record.job_dir)[-1]["reason"] == "stopped"
    assert manager.stop(record.job_id) is stopped  # stopping again changes nothing


def test_stop_kills_the_whole_process_group_of_a_job_that_ignores_it(make_manager) -> None:
    manager = make_manager(stop_grace_seconds=0.3)
    record = manager.start(config(), {"behaviour": "ignore_stop"})
    wait_for_progress(record)
    child = int(wait_for_file(record.job_dir / "child.pid"))
    stopped = manager.stop(record.job_id)
    assert stopped.state == learner_pb2.JOB_STATE_STOPPED
    assert record.handle.poll() is not None and process_gone(child)


def test_a_finished_job_is_not_stopped(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "budget"})
    wait_done(manager, record.job_id)
    assert manager.stop(record.job_id).state == learner_pb2.JOB_STATE_SUCCEEDED
    assert not (record.job_dir / "stop").exists()


def test_resume_continues_a_stopped_or_failed_job_only(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "until_stop"})
    with pytest.raises(FailedPrecondition, match="is JOB_STATE_RUNNING; only a stopped or failed job can resume"):
        manager.resume(record.job_id, {"behaviour": "budget"})
    wait_for_progress(record)
    manager.stop(record.job_id)
    (record.job_dir / "error.json").write_text('{"message": "old"}')
    resumed = manager.resume(record.job_id, {"behaviour": "budget"})
    assert resumed is record and record.resumes == 1 and record.state == learner_pb2.JOB_STATE_RUNNING
    assert not (record.job_dir / "stop").exists() and not (record.job_dir / "error.json").exists()
    assert json.loads((record.job_dir / "config.json").read_text())["behaviour"] == "budget"
    assert wait_done(manager, record.job_id)[-1].state == learner_pb2.JOB_STATE_SUCCEEDED
    assert json.loads(record.state_path.read_text())["resumes"] == 1
    with pytest.raises(FailedPrecondition, match="JOB_STATE_SUCCEEDED"):
        manager.resume(record.job_id, {})


def test_the_concurrency_limit_is_resource_exhausted(make_manager) -> None:
    manager = make_manager(max_concurrent_jobs=1)
    first = manager.start(config(), {"behaviour": "hang"})
    with pytest.raises(ResourceExhausted, match=r"1 jobs are running, the learner's limit \(1\)"):
        manager.start(config(), {"behaviour": "hang"})
    manager.stop(first.job_id, wait=False)
    manager.start(config(), {"behaviour": "budget"})  # a slot is free again


def test_a_runner_this_learner_lacks_is_failed_precondition_and_takes_no_slot(make_manager) -> None:
    manager = make_manager(max_concurrent_jobs=1)
    with pytest.raises(FailedPrecondition, match="runner 'kubernetes' is not configured on this learner"):
        manager.start(config(runner="kubernetes"), {"behaviour": "budget"})
    assert manager.all() == [] and list(manager.root.iterdir()) == []  # nothing of it is left
    record = manager.start(config(), {"behaviour": "budget"})  # the refused job holds no slot
    assert wait_done(manager, record.job_id)[-1].state == learner_pb2.JOB_STATE_SUCCEEDED


class Refusing(LocalRunner):
    """A runner whose launch fails while ``refuse`` is set, as the kubernetes runner's does when the API is down."""

    refuse = False

    def launch(self, job_id: str, job_dir: Path, config: learner_pb2.RLConfig) -> JobHandle:
        if self.refuse:
            raise Unavailable("API server unreachable")
        return super().launch(job_id, job_dir, config)


def test_a_resume_that_cannot_launch_leaves_the_job_failed_and_resumable(make_manager) -> None:
    runner = Refusing()
    manager = make_manager({"local": runner}, max_concurrent_jobs=1)
    record = manager.start(config(), {"behaviour": "until_stop"})
    wait_for_progress(record)
    manager.stop(record.job_id)
    runner.refuse = True
    with pytest.raises(Unavailable):
        manager.resume(record.job_id, {"behaviour": "budget"})
    assert record.state == learner_pb2.JOB_STATE_FAILED and "API server unreachable" in record.message
    assert json.loads(record.state_path.read_text())["state"] == "JOB_STATE_FAILED"
    runner.refuse = False
    manager.resume(record.job_id, {"behaviour": "budget"})  # not counted as running while it failed to launch
    assert wait_done(manager, record.job_id)[-1].state == learner_pb2.JOB_STATE_SUCCEEDED


def test_unknown_jobs_are_not_found_quoted_briefly(make_manager) -> None:
    manager = make_manager()
    with pytest.raises(NotFound, match="no job 'nope'; ListJobs shows the known jobs"):
        manager.get("nope")
    with pytest.raises(NotFound) as info:
        manager.stop("j" * 5_000_000)
    assert len(str(info.value)) < 200
    with pytest.raises(NotFound):
        list(manager.watch("nope", lambda: True))


class Reattaching(LocalRunner):
    """The kubernetes runner's behaviour after a learner restart: a job still running is adopted again."""

    def __init__(self, alive: set[str]):
        self.alive = alive

    def reattach(self, job_id: str, job_dir: Path) -> JobHandle | None:
        return StillRunning() if job_id in self.alive else None


class StillRunning(JobHandle):
    def poll(self) -> int | None:
        return None

    def kill(self) -> None:
        pass

    def describe(self) -> str:
        return "adopted"


def test_a_restarted_learner_lists_jobs_again_and_fails_the_ones_it_lost(make_manager, tmp_path: Path) -> None:
    manager = make_manager()
    done = manager.start(config(), {"behaviour": "budget"})
    wait_done(manager, done.job_id)
    lost = manager.start(config(), {"behaviour": "hang"})
    gone = manager.start(config(), {"behaviour": "hang"})
    adopted = manager.start(config(), {"behaviour": "hang"})
    manager._stop.set()  # the learner dies: its monitor stops, its jobs' states stay RUNNING on disk
    # What a training does when its learner is gone (job_watch): a checkpoint, then its final record.
    with (gone.job_dir / "progress.jsonl").open("a") as f:
        f.write(json.dumps({"time": time.time(), "env_frames": 200, "final": True, "reason": "learner_gone"}) + "\n")
    (tmp_path / "jobs" / "broken").mkdir()
    (tmp_path / "jobs" / "broken" / "state.json").write_text("{}")
    again = make_manager({"local": Reattaching({adopted.job_id})})
    states = {r.job_id: r for r in again.all()}
    assert set(states) == {done.job_id, lost.job_id, gone.job_id, adopted.job_id}  # the unreadable one is skipped
    assert states[done.job_id].state == learner_pb2.JOB_STATE_SUCCEEDED
    # FAILED with the reason, as the README says, and resumable.
    assert states[gone.job_id].state == learner_pb2.JOB_STATE_FAILED
    assert states[gone.job_id].message.startswith("learner_gone: the learner that watched it was gone; the job saved "
                                                  "a checkpoint at 200 frames and exited; resume it with StartTraining")
    assert states[lost.job_id].state == learner_pb2.JOB_STATE_FAILED
    assert states[lost.job_id].message.startswith("learner_gone: the learner that watched it died and the job left "
                                                  "no final record; resume it with StartTraining(resume_job_id)")
    assert json.loads(states[lost.job_id].state_path.read_text())["state"] == "JOB_STATE_FAILED"
    assert states[adopted.job_id].state == learner_pb2.JOB_STATE_RUNNING
    assert states[lost.job_id].config == config()


def test_close_stops_running_jobs(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "hang"})
    manager.close()
    assert record.state == learner_pb2.JOB_STATE_STOPPED and (record.job_dir / "stop").exists()
    assert record.handle.poll() is not None


def test_remove_deletes_the_job_and_its_directory(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "budget"})
    wait_done(manager, record.job_id)
    manager.remove(record.job_id)
    assert not record.job_dir.exists()
    with pytest.raises(NotFound):
        manager.get(record.job_id)


def test_progress_of_a_job_without_records_is_zero_with_its_message(make_manager) -> None:
    manager = make_manager()
    record = manager.start(config(), {"behaviour": "hang"})
    progress = manager.progress(record)
    assert progress.job_id == record.job_id and progress.state == learner_pb2.JOB_STATE_RUNNING
    assert progress.env_frames == 0 and progress.message == record.message


def wait_for_progress(record: JobRecord, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not jobs.read_progress(record.job_dir):
        assert time.monotonic() < deadline, "no progress record"
        time.sleep(0.02)


def wait_for_file(path: Path, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return path.read_text()

