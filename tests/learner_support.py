"""What the tests of the real learner share: an in-process learner over a real env server, talked to over a real
channel; its settings; the wood config the trainings use; following a job to its end."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, learner_pb2_grpc
from services.learner.servicer import SERVICE_NAME, LearnerServicer
from services.learner.settings import LearnerSettings


@dataclasses.dataclass
class Learner:
    """A learner started by ``start_learner``; ``stop`` ends its jobs and its server."""

    stub: learner_pb2_grpc.LearnerServiceStub
    servicer: LearnerServicer
    server: grpc.Server
    channel: grpc.Channel
    settings: LearnerSettings
    target: str = ""
    """Its address (HOST:PORT), for a planner to reach it."""

    def close(self) -> None:
        self.channel.close()
        stop_server(self.server, grace_seconds=1)

    def stop(self) -> None:
        self.servicer.close()
        self.close()


def start_learner(settings: LearnerSettings, runners=None) -> Learner:
    servicer = LearnerServicer(settings, runners)
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(SERVICE_NAME, learner_pb2_grpc.add_LearnerServiceServicer_to_server, servicer)],
        metrics_label="learner")
    channel = create_channel(f"127.0.0.1:{port}", default_timeout=120, wait_ready_seconds=10)
    return Learner(learner_pb2_grpc.LearnerServiceStub(channel), servicer, server, channel, settings,
                   f"127.0.0.1:{port}")


def register_skills(env_server, skills: dict[str, str]) -> None:
    """Registers the ``skills`` (name -> code) on ``env_server``, replacing any of the same name."""
    for name, code in skills.items():
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))


def settings_for(env_target: str, run_dir: Path, **overrides) -> LearnerSettings:
    fields = dict(env_server=env_target, run_dir=str(run_dir), max_workers=2, watchdog_seconds=60,
                  progress_interval_seconds=1.0, stop_grace_seconds=30)
    return LearnerSettings(**{**fields, **overrides})


def wood_config(frames: int, skills=("learn_wood",), **fields) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(
        name="wood", task=common_pb2.TaskSpec(name="collect_wood"), skills=list(skills), skill_max_steps=8,
        episode_length=150, env_frames=frames, num_workers=2, envs_per_worker=2, seed=3,
        reward_terms=[common_pb2.RewardTerm(kind="success", weight=1.0),
                      common_pb2.RewardTerm(kind="step", weight=-0.001)], **fields)


def watch_until_done(learner: Learner, job_id: str, timeout: float = 400) -> list[learner_pb2.JobProgress]:
    return list(learner.stub.WatchJob(learner_pb2.WatchJobRequest(job_id=job_id), timeout=timeout))


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Polls ``predicate`` every 0.5 s until it holds; AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")
