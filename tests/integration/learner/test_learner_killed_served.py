"""A learner SIGKILLed while its job trains (issue 38, item 6): the job sees its learner gone, saves a checkpoint and
exits with that reason; the learner started again lists it FAILED with the reason, as the README says (it read
STOPPED), and resumable. A real learner process (``rlgpt serve learner``), a real training over the real env server.

And the learner SIGKILLed while a run's RL sub-task trains: the run pauses naming the learner, its address and how to
resume; the learner started again on its port, the run resumed by id goes on to its end with nothing done before the
kill lost (the coded sub-task, its library skill, the killed training's frames) and its report counts the whole run:
every LLM call and every frame its events show, the killed training's included. Real services on loopback, a
scripted LLM (test double)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fault_support import (
    RESUME,
    RunFiles,
    assert_nothing_lost,
    assert_whole_run_counted,
    kill_when_training,
    killable_services,
    trainings_of,
)
from learner_support import register_skills, settings_for, start_learner, wait_for, wood_config
from rlgpt_run_support import RL, options, schema_of, subtask

from rlgpt.app.launcher import start_service
from rlgpt.app.runner import run_rlgpt
from rlgpt.errors import Unavailable
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


CODE_THEN_RL = {"rationale": "a first wood by code, the rest by RL", "subtasks": [
    subtask("first_wood", "code", item="wood", count=1),
    subtask("get_wood", "rl", achievement="collect_wood")]}
RL_ANSWERS = [RL, {**RL, "env_frames": 2000}]
"""The first training takes the whole offer (the kill lands in it), the one after the resume 2000 frames."""


def test_a_run_whose_learner_was_killed_resumes_to_its_end(tmp_path) -> None:
    learner_env = {"RLGPT_LEARNER_MAX_WORKERS": "2", "RLGPT_LEARNER_PROGRESS_INTERVAL_SECONDS": "1",
                   "RLGPT_LEARNER_STOP_GRACE_SECONDS": "30"}
    with killable_services(tmp_path, victim="learner", delay=0, at=0, plan=CODE_THEN_RL,
                           answers={"RLConfig": RL_ANSWERS}, service_env=learner_env) as services:
        learner = services.processes["learner"].target
        killer = kill_when_training(services)
        try:
            with pytest.raises(Unavailable) as info:
                run_rlgpt(options(tmp_path / "client", planner=services.planner, env_servers=1,
                                  frames_per_training=50_000, total_frames=60_000))
            assert services.script.killed.is_set(), "the run ended before its training reported frames"
            message = str(info.value)
            assert f"the run stopped: the learner at {learner} is unavailable (" in message
            assert "the run is paused: resume it with --resume once the learner is back" in message
            resume = RESUME.search(message)
            assert resume and resume.group(2) == services.planner, message
            run_dir = services.runs / resume.group(1)
            paused = RunFiles.read(run_dir)
            assert paused.state["subtasks"]["first_wood"]["status"] == "done" and "first_wood" in paused.library
            killed_job = paused.state["subtasks"]["get_wood"]["job_id"]
            assert paused.state["subtasks"]["get_wood"]["frames"] > 0, "the killed training's frames are not counted"

            services.restart("learner")
            run_rlgpt(options(tmp_path / "client", planner=resume.group(2), resume=Path(resume.group(1))))
            done = RunFiles.read(run_dir)
            asked = [schema_of(body) for body in services.llm.requests]
            with create_channel(learner, default_timeout=30) as channel:
                spent = {job.job_id: job.progress.env_frames for job in learner_pb2_grpc.LearnerServiceStub(
                    channel).ListJobs(learner_pb2.ListJobsRequest()).jobs}
        finally:
            killer.join(timeout=1)
            for process in trainings_of(services.runs / "learner" / "jobs"):
                process.kill()
    assert asked.count("Plan") == 1 and asked.count("SkillAnswer") == 1, asked  # first_wood not coded again
    assert asked.count("RLConfig") == 2, asked  # the killed training's config, then the resumed attempt's
    assert_nothing_lost(paused, done)
    assert_whole_run_counted(done, llm_calls=len(asked))
    counted = done.training_frames()
    assert killed_job in counted and len(counted) == 2, counted
    # Every frame the learner says each training spent, the killed one's after the run's last look at it included.
    assert counted == spent, f"the run counts {counted} frames of its trainings, the learner {spent}"
