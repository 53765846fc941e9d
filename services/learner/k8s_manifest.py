"""The ``batch/v1`` Job manifest of a training job on Kubernetes (:mod:`services.learner.k8s` creates it).

The Job runs ``train_command(job_dir)`` in ``settings.k8s_image`` with the run dir's
PersistentVolumeClaim (``settings.k8s_run_dir_claim``) mounted, so the training process reads and
writes the same ``<run_dir>/jobs/<job_id>/`` files as a local one (see :mod:`services.learner.jobs`).

Paths. The claim is mounted in the container at ``settings.run_dir`` when that is absolute, and at
``/data/<run_dir>`` when it is relative (a relative path means nothing in a container whose working
directory the image decides). The ``job_dir`` handed to :func:`build_job_manifest` is the learner's
own path (``<run_dir>/jobs/<job_id>``, relative or absolute); it is translated to the same place under
the mount point. For the files to be shared the learner must see that same volume at ``run_dir``
(e.g. the learner's Deployment mounts the claim at an absolute ``RLGPT_LEARNER_RUN_DIR``, which makes
the translation the identity).

Names. The Job is ``rlgpt-train-<job_id>``, made DNS-1123 safe and cut to 63 characters (the Job
name becomes a label value on its pods, which are limited to 63); a job id that had to be changed
gets a short hash of the original so that two ids never map to one name. The full job id is kept in
the ``rlgpt.dev/job-id`` annotation.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path, PurePosixPath
from typing import Any

from rlgpt.errors import InvalidArgument
from rlgpt.v1 import learner_pb2
from services.learner.jobs import train_command
from services.learner.rl_config import num_workers
from services.learner.settings import LearnerSettings

JOB_NAME_PREFIX = "rlgpt-train-"
MAX_NAME_LENGTH = 63
RELATIVE_RUN_DIR_ROOT = PurePosixPath("/data")
LABEL_NAME = "app.kubernetes.io/name"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_JOB_ID = "rlgpt.dev/job-id"
ANNOTATION_JOB_ID = "rlgpt.dev/job-id"
ANNOTATION_JOB_DIR = "rlgpt.dev/job-dir"
GPU_RESOURCE = "nvidia.com/gpu"
RUN_AS_USER = 10001  # the uid of the rlgpt images (deploy/docker)
TTL_SECONDS_AFTER_FINISHED = 3600

_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def job_name(job_id: str) -> str:
    """The Job name of a job id: ``rlgpt-train-<job_id>``, DNS-1123 safe and at most 63 characters.

    Deterministic, so :meth:`services.learner.k8s.KubernetesRunner.reattach` finds the Job again from the id alone.
    """
    slug = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")
    name = JOB_NAME_PREFIX + slug
    if slug == job_id and len(name) <= MAX_NAME_LENGTH:
        return name
    # Changed or cut: the hash keeps distinct ids (e.g. "Run_1" and "run-1") on distinct Jobs.
    digest = _short_hash(job_id)
    room = MAX_NAME_LENGTH - len(JOB_NAME_PREFIX) - len(digest) - 1
    slug = slug[:room].rstrip("-")
    return f"{JOB_NAME_PREFIX}{slug}-{digest}" if slug else JOB_NAME_PREFIX + digest


def _label_value(job_id: str) -> str:
    """A label value for the job id: the id itself when valid, else a valid stand-in (the annotation has the id)."""
    if len(job_id) <= MAX_NAME_LENGTH and _LABEL_VALUE_RE.match(job_id):
        return job_id
    return job_name(job_id)[len(JOB_NAME_PREFIX):]


def container_run_dir(settings: LearnerSettings) -> PurePosixPath:
    """Where the run-dir claim is mounted in the container: ``run_dir`` if absolute, else ``/data/<run_dir>``."""
    run_dir = PurePosixPath(settings.run_dir)
    return run_dir if run_dir.is_absolute() else RELATIVE_RUN_DIR_ROOT / run_dir


def container_job_dir(job_dir: Path, settings: LearnerSettings) -> PurePosixPath:
    """The container path of the learner's ``job_dir``, which must lie under ``settings.run_dir``."""
    run_dir = Path(settings.run_dir)
    for base, path in ((run_dir, job_dir), (run_dir.resolve(), job_dir.resolve())):
        try:
            relative = path.relative_to(base)
        except ValueError:
            continue
        return container_run_dir(settings) / PurePosixPath(relative.as_posix())
    raise InvalidArgument(f"job dir {job_dir} is not under the run dir {settings.run_dir}: a Kubernetes Job "
                          f"only sees the run dir's volume (claim {settings.k8s_run_dir_claim})")


def _cpu_count(config: learner_pb2.RLConfig) -> int:
    # One core per rollout worker plus one for Sample Factory's learner/batcher process.
    return num_workers(config) + 1


def build_job_manifest(job_id: str, job_dir: Path, config: learner_pb2.RLConfig,
                       settings: LearnerSettings) -> dict[str, Any]:
    """The ``batch/v1`` Job that runs one training job, as the plain dict ``kubectl apply`` would take.

    ``job_dir`` is the learner's path of the job (under ``settings.run_dir``); the container gets the
    translated path (see the module docstring).
    """
    name = job_name(job_id)
    in_container_dir = container_job_dir(job_dir, settings)
    labels = {LABEL_NAME: "rlgpt", LABEL_COMPONENT: "learner-job", LABEL_JOB_ID: _label_value(job_id)}
    annotations = {ANNOTATION_JOB_ID: job_id, ANNOTATION_JOB_DIR: str(in_container_dir)}
    cpu = str(_cpu_count(config))
    requests: dict[str, str] = {"cpu": cpu, "memory": "4Gi"}
    limits: dict[str, str] = {"cpu": cpu, "memory": "8Gi"}
    if config.gpu:
        # Extended resources must have requests == limits; the device plugin hands out one whole GPU.
        requests[GPU_RESOURCE] = "1"
        limits[GPU_RESOURCE] = "1"
    container: dict[str, Any] = {
        "name": "train",
        "image": settings.k8s_image,
        "command": train_command(Path(str(in_container_dir))),
        "env": [
            {"name": "RLGPT_LEARNER_ENV_SERVER", "value": settings.env_server},
            {"name": "RLGPT_LEARNER_DEVICE", "value": "cuda" if config.gpu else "cpu"},
            {"name": "RLGPT_LEARNER_RUN_DIR", "value": str(container_run_dir(settings))},
            {"name": "PYTHONUNBUFFERED", "value": "1"},  # pod logs in real time
        ],
        "resources": {"requests": requests, "limits": limits},
        "volumeMounts": [
            {"name": "run-dir", "mountPath": str(container_run_dir(settings))},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
        # The "restricted" Pod Security Standard: training needs no privileges.
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",  # a crash is reported, not retried: the learner decides about resumes
        # The Job calls no Kubernetes API; no service account token needs to be in it.
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "fsGroup": RUN_AS_USER,  # so the (root-owned) claim is writable by the training process
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": "run-dir", "persistentVolumeClaim": {"claimName": settings.k8s_run_dir_claim}},
            # Sample Factory's shared-memory buffers; the default /dev/shm of a container is 64 MiB.
            # Memory-backed, so it counts against the container's memory limit.
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    if config.gpu:
        # GPU nodes are commonly tainted nvidia.com/gpu:NoSchedule; the GPU limit itself already
        # restricts scheduling to nodes that advertise nvidia.com/gpu, so no nodeSelector is needed.
        pod_spec["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": settings.k8s_namespace, "labels": dict(labels),
                     "annotations": dict(annotations)},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
            "template": {
                "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
                "spec": pod_spec,
            },
        },
    }
