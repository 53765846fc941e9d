"""What the Kubernetes runner's tests share (unit: its manifest; integration: its calls to the API test double)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlgpt.v1 import learner_pb2
from services.learner.settings import LearnerSettings

NS = "rlgpt-test"
SETTINGS = LearnerSettings(k8s_namespace=NS, k8s_image="registry.example/rlgpt-learner:1.2", run_dir="/runs",
                           k8s_run_dir_claim="rlgpt-runs", env_server="rlgpt-env:50051")
JOB_ID = "0a1b2c3d4e5f"
JOB_DIR = Path("/runs/jobs") / JOB_ID


def rl_config(gpu: bool = False, num_workers: int = 3) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(name="collect wood", env_frames=10_000, num_workers=num_workers,
                                envs_per_worker=4, runner="kubernetes", gpu=gpu)


def container(manifest: dict[str, Any]) -> dict[str, Any]:
    (only,) = manifest["spec"]["template"]["spec"]["containers"]
    return only

