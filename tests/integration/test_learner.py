"""The learner over real gRPC: real Sample Factory APPO on Crafter through a real env server. The session's
learner and its wood training (tests/integration/conftest.py) are shared with test_learner_chain and
test_learner_plan; trainings stopped, killed or failed on purpose are their own."""

from __future__ import annotations

import io
import sys

import grpc
import PIL.Image
import pytest
from learner_support import Learner, settings_for, start_learner, wait_for, watch_until_done, wood_config

from rlgpt.app.launcher import start_service
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.learner.jobs import JobHandle, LocalHandle, LocalRunner

pytestmark = pytest.mark.timeout(600)
# Fails only once an episode has run a while (food drops after ~26 frames): RegisterSkill's test worlds start
# with full food, so it is accepted, and training meets the error.
FAILS_AFTER_THREE = ("def skill(agent):\n    yield 'noop'\n    yield 'noop'\n    yield 'noop'\n"
                     "    if agent.food < 9:\n        raise ValueError('gave up')\n")


@pytest.fixture(scope="module", autouse=True)
def skills(env_server) -> None:
    """This file's skills, registered on the session's env server (which the session's learner uses)."""
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="learn_wood", code=COLLECT_WOOD, replace=True))
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="fails_after_three", code=FAILS_AFTER_THREE,
                                                               replace=True))


def test_appo_training_with_a_skill_end_to_end(learner, wood_job) -> None:
    job_id, progress = wood_job  # the session's wood training, which test_learner_chain evaluates too
    final = progress[-1]
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED, final.message
    assert final.env_frames >= 2500 and final.fps > 0 and final.episodes > 0
    assert final.skill_frame_fraction > 0  # the coded skill was chosen and its frames were counted
    assert sum(final.action_shares.values()) == pytest.approx(1.0, abs=1e-3)  # what the policy chose, by name
    assert final.action_shares["skill:learn_wood"] > 0
    assert final.mean_return != 0
    assert any(p.state == learner_pb2.JOB_STATE_RUNNING for p in progress)
    frames_seen = [p.env_frames for p in progress]
    assert frames_seen == sorted(frames_seen)
    evaluation = learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=3, seed=1,
                                                                   frames_per_episode=3), timeout=300)
    assert len(evaluation.episodes) == 3 and len(evaluation.returns) == 3
    assert all(e.text.startswith("start:") for e in evaluation.episodes)
    assert 0.0 <= evaluation.success_rate <= 1.0
    assert len(evaluation.frames) == 3
    for frames, episode in zip(evaluation.frames, evaluation.episodes, strict=True):
        # Observations the policy acted on: the first one, the last one, one between (an episode of one or
        # two actions has fewer); each step is the env frames taken before it.
        assert 1 <= len(frames.png) == len(frames.steps) <= 3
        assert frames.steps[0] == 0 and list(frames.steps) == sorted(set(frames.steps))
        assert frames.steps[-1] < episode.steps
        for png in frames.png:
            image = PIL.Image.open(io.BytesIO(png))
            assert image.format == "PNG" and image.mode == "RGB" and image.size == (64, 64)
    short = learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=2, seed=1, episode_length=5))
    assert all(e.steps <= 5 for e in short.episodes)
    jobs = learner.stub.ListJobs(learner_pb2.ListJobsRequest()).jobs
    assert job_id in [j.job_id for j in jobs]


def test_skill_errors_are_counted_and_training_goes_on(learner) -> None:
    config = wood_config(1200, skills=("fails_after_three",), primitive_actions=["noop", "do"])
    job_id = learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=config)).job_id
    final = watch_until_done(learner, job_id)[-1]
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED, final.message
    assert final.skill_errors > 0 and final.env_frames >= 1200


BAD_CONFIGS = {
    "unknown_action": (dict(primitive_actions=["fly"]), "unknown action 'fly'"),
    "unknown_skill": (dict(skills=["no_such_skill"]), "unknown skill 'no_such_skill'"),
    "zero_budget": (dict(env_frames=0), "env_frames=0"),
    "negative_budget": (dict(env_frames=-10), "env_frames=-10"),
    "k_below_one": (dict(skill_max_steps=-1), "K must be >= 1"),
    "unknown_reward": (dict(reward_terms=[common_pb2.RewardTerm(kind="happiness")]), "unknown kind 'happiness'"),
    "too_many_workers": (dict(num_workers=512), "num_workers=512"),
    "target_on_untargeted_kind": (dict(reward_terms=[common_pb2.RewardTerm(kind="success", target="eat_cow")]),
                                  "takes no target"),
    # The task is judged by the env server alone (the learner opens a session with it).
    "task_that_cannot_succeed": (dict(task=common_pb2.TaskSpec(name="win_game")),
                                 "the env server refused it: no task 'win_game' on crafter"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_configs_are_invalid_argument(learner, case: str) -> None:
    fields, needle = BAD_CONFIGS[case]
    config = wood_config(1000)
    for key, value in fields.items():
        if isinstance(value, list):
            del getattr(config, key)[:]
            getattr(config, key).extend(value)
        elif key == "task":
            config.task.CopyFrom(value)
        else:
            setattr(config, key, value)
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=config))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert needle in info.value.details()


@pytest.mark.parametrize("value", [9, -1])
def test_evaluate_frames_outside_the_limit_are_invalid_argument(learner, value: int) -> None:
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id="nope", episodes=1, frames_per_episode=value))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"frames_per_episode={value} must be in 0..8" in info.value.details()


def test_evaluate_negative_episode_length_is_invalid_argument(learner) -> None:
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id="nope", episodes=1, episode_length=-3))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "episode_length=-3" in info.value.details()


def test_watch_unknown_job_is_not_found(learner) -> None:
    with pytest.raises(grpc.RpcError) as info:
        list(learner.stub.WatchJob(learner_pb2.WatchJobRequest(job_id="nope"), timeout=10))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.StopJob(learner_pb2.StopJobRequest(job_id="nope"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id="nope", episodes=1))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as info:  # a bad value is quoted as a short prefix, never copied whole
        learner.stub.StopJob(learner_pb2.StopJobRequest(job_id="j" * 128))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND and len(info.value.details()) < 300
    with pytest.raises(grpc.RpcError) as info:  # beyond the request limits: named by its size
        learner.stub.StopJob(learner_pb2.StopJobRequest(job_id="j" * 5_000_000))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "job_id is 5000000 chars; the limit is 128"


def job(learner: Learner, job_id: str) -> learner_pb2.JobInfo:
    return next(j for j in learner.stub.ListJobs(learner_pb2.ListJobsRequest()).jobs if j.job_id == job_id)


def test_stop_restart_and_resume_from_checkpoint(env_server, skills, tmp_path) -> None:
    settings = settings_for(env_server.target, tmp_path)
    first = start_learner(settings)
    try:
        job_id = first.stub.StartTraining(learner_pb2.StartTrainingRequest(config=wood_config(1_000_000))).job_id
        wait_for(lambda: job(first, job_id).progress.env_frames > 600, 240, "training progress")
        stopped = first.stub.StopJob(learner_pb2.StopJobRequest(job_id=job_id), timeout=120)
        assert stopped.state == learner_pb2.JOB_STATE_STOPPED
        frames_at_stop = stopped.env_frames
    finally:
        first.servicer.close()
        first.close()
    checkpoints = list((tmp_path / "jobs" / job_id / "sf").rglob("checkpoint_*.pth"))
    assert checkpoints, "a stopped job keeps a checkpoint"
    second = start_learner(settings)  # a learner restart: jobs are found on disk again
    try:
        listed = job(second, job_id)
        assert listed.progress.state == learner_pb2.JOB_STATE_STOPPED
        assert listed.config.env_frames == 1_000_000
        # A checkpoint trained on another observation vector (an older env) is refused before anything launches,
        # with what to do, instead of Sample Factory's size-mismatch error in a learner process.
        import torch

        latest = sorted(checkpoints)[-1]
        saved = latest.read_bytes()
        state = torch.load(latest, map_location="cpu", weights_only=False)
        state["model"]["encoder.vector.0.weight"] = torch.zeros(64, 20)
        torch.save(state, latest)
        with pytest.raises(grpc.RpcError) as info:
            second.stub.StartTraining(learner_pb2.StartTrainingRequest(resume_job_id=job_id))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "The checkpoint's: a vector of 20 entries" in info.value.details()
        assert "train the job again" in info.value.details()
        assert job(second, job_id).progress.state == learner_pb2.JOB_STATE_STOPPED  # nothing launched
        latest.write_bytes(saved)
        second.stub.StartTraining(learner_pb2.StartTrainingRequest(resume_job_id=job_id))
        wait_for(lambda: job(second, job_id).progress.env_frames > frames_at_stop + 200, 240, "resumed progress")
        resumed_log = (tmp_path / "jobs" / job_id / "train.log").read_text().rsplit("Loading state from checkpoint", 1)
        assert len(resumed_log) == 2, "the resumed job looked for its checkpoint"
        assert "Loaded experiment state" in resumed_log[1] and "starting from scratch" not in resumed_log[1]
        assert job(second, job_id).progress.env_frames >= frames_at_stop  # it goes on from where it stopped
        second.stub.StopJob(learner_pb2.StopJobRequest(job_id=job_id), timeout=120)
    finally:
        second.servicer.close()
        second.close()


def test_a_training_process_told_to_terminate_stops_with_a_checkpoint_and_leaves_no_workers(
        env_server, skills, tmp_path) -> None:
    import os
    import signal

    import psutil

    settings = settings_for(env_server.target, tmp_path)
    learner = start_learner(settings)
    try:
        job_id = learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=wood_config(1_000_000))).job_id
        wait_for(lambda: job(learner, job_id).progress.env_frames > 200, 240, "training progress")
        job_dir = str(tmp_path / "jobs" / job_id)
        train = next(p for p in psutil.process_iter(["cmdline"])
                     if "services.learner.train" in (p.info["cmdline"] or []) and job_dir in p.info["cmdline"])
        workers = train.children(recursive=True)
        assert workers, "Sample Factory runs its workers as processes of their own"
        os.kill(train.pid, signal.SIGTERM)  # `kill PID` by a person, the training process alone
        final = watch_until_done(learner, job_id, timeout=120)[-1]
        assert final.state == learner_pb2.JOB_STATE_STOPPED, final.message
        assert list((tmp_path / "jobs" / job_id / "sf").rglob("checkpoint_*.pth"))
        _gone, alive = psutil.wait_procs(workers, timeout=30)
        assert not alive, f"orphaned workers: {[p.pid for p in alive]}"
    finally:
        learner.servicer.close()
        learner.close()


def test_env_server_going_away_fails_the_job_clearly(tmp_path) -> None:
    env = start_service("env", tmp_path / "logs")
    try:
        stub = env_pb2_grpc.EnvServiceStub(create_channel(env.target, wait_ready_seconds=10))
        stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="learn_wood", code=COLLECT_WOOD))
        learner = start_learner(settings_for(env.target, tmp_path / "run"))
        try:
            job_id = learner.stub.StartTraining(
                learner_pb2.StartTrainingRequest(config=wood_config(1_000_000))).job_id
            wait_for(lambda: job(learner, job_id).progress.env_frames > 200, 240, "training progress")
            env.process.kill()  # the env server dies mid-training
            final = watch_until_done(learner, job_id, timeout=180)[-1]
            assert final.state == learner_pb2.JOB_STATE_FAILED
            assert "env server" in final.message and env.target in final.message
            # The job stopped itself with a checkpoint (job_watch), rather than being killed.
            assert final.message.startswith("env_server_lost: ") and "saved a checkpoint" in final.message
            assert list((tmp_path / "run" / "jobs" / job_id / "sf").rglob("checkpoint_*.pth"))
        finally:
            learner.servicer.close()
            learner.close()
    finally:
        env.stop()


class StalledRunner(LocalRunner):
    """Test double of a runner whose training process hangs without progress (as a crashed APPO worker can)."""

    def launch(self, job_id, job_dir, config) -> JobHandle:
        import subprocess

        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        return LocalHandle(process)


def test_watchdog_kills_a_stalled_job(env_server, skills, tmp_path) -> None:
    learner = start_learner(settings_for(env_server.target, tmp_path, watchdog_seconds=2.0),
                            runners={"local": StalledRunner()})
    try:
        job_id = learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=wood_config(1000))).job_id
        final = watch_until_done(learner, job_id, timeout=60)[-1]
        assert final.state == learner_pb2.JOB_STATE_FAILED and "watchdog" in final.message
    finally:
        learner.servicer.close()
        learner.close()
