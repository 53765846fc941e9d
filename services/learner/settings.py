"""The learner's settings; the loader and the settings services share are in :mod:`rlgpt.config`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from rlgpt.config import Settings, setting


@dataclasses.dataclass(frozen=True)
class LearnerSettings(Settings):
    """Settings of the learner (``RLGPT_LEARNER_*``)."""

    env_prefix: ClassVar[str] = "RLGPT_LEARNER"

    env_server: str = setting("127.0.0.1:50051", "Address (host:port) of the env server the learner asks (Describe, "
                              "skills, evaluations) and the training envs use.")
    env_servers: str = setting("", "Env servers for training sessions instead of env_server, comma-separated: "
                               "HOST:PORT, or dns:///NAME:PORT for every address NAME resolves to at StartTraining "
                               "(a Kubernetes headless Service). A job's rollout workers put their sessions on them "
                               "in turn; the job's skills are copied to each from env_server.")
    run_dir: str = setting("runs/learner", "Directory holding every job's config, state, logs and checkpoints.")
    runner: str = setting("local", "Default job runner: local (a subprocess here) or kubernetes (a Job per training).",
                          choices=("local", "kubernetes"))
    max_workers: int = setting(0, "Max rollout workers per job; 0 means the number of CPU cores.", ge=0)
    max_envs_per_worker: int = setting(64, "Max envs per rollout worker.", ge=1)
    max_env_frames: int = setting(100_000_000, "Largest env-frame budget a config may ask for.", ge=1)
    max_concurrent_jobs: int = setting(4, "Jobs that may run at once on the local runner.", ge=1)
    watchdog_seconds: float = setting(120.0, "A job with no progress for this long is killed and marked FAILED.",
                                      gt=0)
    progress_interval_seconds: float = setting(2.0, "How often a training job writes a progress record.", gt=0)
    heartbeat_timeout_seconds: float = setting(
        600.0, "A training job that no learner has watched for this long (its heartbeat file is stale) saves a "
        "checkpoint and exits: a Kubernetes Job outliving its learner. Local jobs watch the learner's pid.", gt=0)
    stop_grace_seconds: float = setting(20.0, "Seconds a stopped job gets to save a checkpoint before it is killed.",
                                        ge=0)
    device: str = setting("cpu", "Torch device of local jobs: cpu or cuda.", choices=("cpu", "cuda"))
    k8s_namespace: str = setting("rlgpt", "Namespace of training Jobs (kubernetes runner).")
    k8s_image: str = setting("rlgpt-learner:latest", "Container image of training Jobs (kubernetes runner).")
    k8s_run_dir_claim: str = setting("rlgpt-runs", "PersistentVolumeClaim mounted at the run dir in training Jobs.")
    k8s_in_cluster: bool = setting(False, "Load the in-cluster Kubernetes config instead of ~/.kube/config.")
