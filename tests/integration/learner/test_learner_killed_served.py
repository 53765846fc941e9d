"""A learner SIGKILLed while its job trains (issue 38, item 6): the job sees its learner gone, saves a checkpoint and
exits with that reason; the learner started again lists it FAILED with the reason, as the README says (it read
STOPPED), and resumable. A real learner process (``rlgpt serve learner``), a real training over the real env server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fault_support import trainings_of
from learner_support import register_skills, settings_for, start_learner, wait_for, wood_config

from rlgpt.app.launcher import start_service
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import learner_pb2, learner_pb2_grpc
from services.env_server.skills.reference import COLLECT_WOOD

pytestmark = pytest.mark.timeout(600)


def final_record(job_dir: Path) -> dict | None:
    path = job_dir / "progress.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    last = json.loads(lines[-1]) if lines else {}
    return last if last.get("final") else None


def test_a_job_whose_learner_was_killed_is_failed_with_the_reason(env_server, tmp_path) -> None:
    register_skills(env_server, {"learn_wood": COLLECT_WOOD})
    run_dir = tmp_path / "learner"
    learner = start_service("learner", tmp_path / "logs", extra_args=(
        "--env-server", env_server.target, "--run-dir", str(run_dir)), env={
        "RLGPT_LEARNER_MAX_WORKERS": "2", "RLGPT_LEARNER_PROGRESS_INTERVAL_SECONDS": "1",
        "RLGPT_LEARNER_STOP_GRACE_SECONDS": "30"})
    job_dir = None
    try:
        with create_channel(learner.target, default_timeout=120) as channel:
            stub = learner_pb2_grpc.LearnerServiceStub(channel)
            job_id = stub.StartTraining(learner_pb2.StartTrainingRequest(config=wood_config(1_000_000))).job_id
            job_dir = (run_dir / "jobs" / job_id).resolve()

            def trains() -> bool:
                info = next(j for j in stub.ListJobs(learner_pb2.ListJobsRequest()).jobs if j.job_id == job_id)
                return info.progress.env_frames > 0

            wait_for(trains, 300, "the training's first frames")
        learner.process.kill()  # SIGKILL: no goodbye to its jobs
        learner.process.wait(timeout=30)  # reaped, so that its pid reads as gone
        wait_for(lambda: final_record(job_dir) is not None, 180, "the job's final record")
        assert final_record(job_dir)["reason"] == "learner_gone"
        wait_for(lambda: not trainings_of(job_dir), 120, "the training processes to exit")
        again = start_learner(settings_for(env_server.target, run_dir))
        try:
            listed = next(j for j in again.stub.ListJobs(learner_pb2.ListJobsRequest()).jobs if j.job_id == job_id)
        finally:
            again.stop()
        assert listed.progress.state == learner_pb2.JOB_STATE_FAILED, listed.progress.message
        assert listed.progress.message.startswith("learner_gone: the learner that watched it was gone; the job saved "
                                                  "a checkpoint at ")
        assert "resume it with StartTraining(resume_job_id)" in listed.progress.message
        assert list((job_dir / "sf").rglob("checkpoint_*.pth")), "the job kept a checkpoint to resume from"
    finally:
        learner.stop()
        for process in trainings_of(job_dir) if job_dir else []:
            process.kill()
