"""The Kubernetes job runner: each training job runs as a ``batch/v1`` Job in the cluster.

The Job runs ``train_command(job_dir)`` in ``settings.k8s_image`` with the run dir's
PersistentVolumeClaim (``settings.k8s_run_dir_claim``) mounted, so the training process reads and
writes the same ``<run_dir>/jobs/<job_id>/`` files as a local one (see :mod:`services.learner.jobs`).

Paths. The claim is mounted in the container at ``settings.run_dir`` when that is absolute, and at
``/data/<run_dir>`` when it is relative (a relative path means nothing in a container whose working
directory the image decides). The ``job_dir`` handed to :meth:`KubernetesRunner.launch` is the
learner's own path (``<run_dir>/jobs/<job_id>``, relative or absolute); it is translated to the same
place under the mount point. For the files to be shared the learner must see that same volume at
``run_dir`` (e.g. the learner's Deployment mounts the claim at an absolute ``RLGPT_LEARNER_RUN_DIR``,
which makes the translation the identity).

Names. The Job is ``rlgpt-train-<job_id>``, made DNS-1123 safe and cut to 63 characters (the Job
name becomes a label value on its pods, which are limited to 63); a job id that had to be changed
gets a short hash of the original so that two ids never map to one name. The full job id is kept in
the ``rlgpt.dev/job-id`` annotation.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes.client
import kubernetes.config
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from rlgpt.config import LearnerSettings
from rlgpt.errors import FailedPrecondition, InvalidArgument, Unavailable
from rlgpt.v1 import learner_pb2
from services.learner.jobs import JobHandle, JobRunner, train_command

log = logging.getLogger(__name__)

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
# (connect, read) seconds per API call: a hung API server must not hang the learner's watchdog.
REQUEST_TIMEOUT = (5.0, 30.0)
_DEFAULT_NUM_WORKERS = 2  # what validate_rl_config fills in for num_workers=0 on a >= 2-core machine

_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def job_name(job_id: str) -> str:
    """The Job name of a job id: ``rlgpt-train-<job_id>``, DNS-1123 safe and at most 63 characters.

    Deterministic, so :meth:`KubernetesRunner.reattach` finds the Job again from the id alone.
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
    return (config.num_workers or _DEFAULT_NUM_WORKERS) + 1


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


def _reason(exc: ApiException) -> str:
    return f"HTTP {exc.status} {exc.reason or ''}".strip()


def _exit_code(job: kubernetes.client.V1Job) -> int | None:
    """0 when the Job completed, 1 when it failed, None while it runs (or waits to be scheduled)."""
    status = job.status
    if status is None:
        return None
    if (status.succeeded or 0) >= 1:
        return 0
    if (status.failed or 0) >= 1:
        return 1
    for condition in status.conditions or []:
        if condition.status == "True" and condition.type == "Complete":
            return 0
        if condition.status == "True" and condition.type == "Failed":
            return 1
    return None


class KubernetesJobHandle(JobHandle):
    """A training job running as a Kubernetes Job; polls the Job's status through the API server."""

    def __init__(self, api: kubernetes.client.BatchV1Api, namespace: str, name: str):
        self.api = api
        self.namespace = namespace
        self.name = name
        self._api_trouble = False  # log an unreachable API once per outage, not on every poll

    def poll(self) -> int | None:
        """0 when the Job succeeded, 1 when it failed or vanished (deleted, TTL), None while it runs.

        An API error other than 404 reads as "still running" (logged): the learner's watchdog ends a
        job whose progress stops, so a flaky API server must not fail healthy jobs.
        """
        try:
            job = self.api.read_namespaced_job_status(self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                log.warning("%s no longer exists; counting it as failed", self.describe())
                return 1
            self._note_trouble(_reason(exc))
            return None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._note_trouble(f"{type(exc).__name__}: {exc}")
            return None
        if self._api_trouble:
            log.info("Kubernetes API reachable again for %s", self.describe())
            self._api_trouble = False
        return _exit_code(job)

    def _note_trouble(self, what: str) -> None:
        if not self._api_trouble:
            log.warning("cannot read the status of %s (%s); treating it as running", self.describe(), what)
            self._api_trouble = True

    def kill(self) -> None:
        """Deletes the Job and (in the background) its pods; a Job already gone is fine.

        Raises Unavailable when the API server refuses or cannot be reached: the Job may still run.
        """
        try:
            self.api.delete_namespaced_job(self.name, self.namespace, propagation_policy="Background",
                                           _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise Unavailable(f"cannot delete {self.describe()}: {_reason(exc)}; it may still be running "
                              f"(kubectl -n {self.namespace} delete job {self.name})")
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unavailable(f"cannot delete {self.describe()}: Kubernetes API unreachable "
                              f"({type(exc).__name__}: {exc})")
        log.info("deleted %s", self.describe())

    def describe(self) -> str:
        return f"kubernetes Job {self.namespace}/{self.name}"


class KubernetesRunner(JobRunner):
    """Runs each training job as a Kubernetes Job (see :func:`build_job_manifest`)."""

    name = "kubernetes"

    def __init__(self, settings: LearnerSettings, api_client: kubernetes.client.ApiClient | None = None):
        """``api_client`` is for tests (a client pointed at a test double); otherwise the kube config
        is loaded: the in-cluster service account when ``settings.k8s_in_cluster``, else ~/.kube/config.
        """
        self.settings = settings
        self.namespace = settings.k8s_namespace
        if api_client is None:
            api_client = kubernetes.client.ApiClient(self._load_configuration(settings))
        self.api = kubernetes.client.BatchV1Api(api_client)

    @staticmethod
    def _load_configuration(settings: LearnerSettings) -> kubernetes.client.Configuration:
        # A private Configuration, not the process-wide default the loaders write to otherwise.
        configuration = kubernetes.client.Configuration()
        try:
            if settings.k8s_in_cluster:
                kubernetes.config.load_incluster_config(client_configuration=configuration)
            else:
                kubernetes.config.load_kube_config(client_configuration=configuration)
        except (kubernetes.config.ConfigException, OSError) as exc:
            where = "the in-cluster service account" if settings.k8s_in_cluster else "~/.kube/config (or $KUBECONFIG)"
            raise FailedPrecondition(f"the kubernetes runner cannot load its cluster config from {where}: {exc}; "
                                     "set RLGPT_LEARNER_K8S_IN_CLUSTER to match where the learner runs")
        return configuration

    def launch(self, job_id: str, job_dir: Path, config: learner_pb2.RLConfig) -> JobHandle:
        """Creates the Job. A Job of that name that still runs is adopted (a learner that crashed
        between creating it and recording it); a finished one (a resumed job) is replaced.
        """
        manifest = build_job_manifest(job_id, job_dir, config, self.settings)
        name = manifest["metadata"]["name"]
        body = kubernetes.client.V1Job.from_dict(manifest)
        for attempt in range(2):
            try:
                self.api.create_namespaced_job(self.namespace, body, _request_timeout=REQUEST_TIMEOUT)
            except ApiException as exc:
                if exc.status != 409:
                    raise Unavailable(self._launch_error(name, _reason(exc), exc))
                handle = KubernetesJobHandle(self.api, self.namespace, name)
                code = handle.poll()
                if code is None:
                    log.info("%s exists already and runs; adopting it", handle.describe())
                    return handle
                if attempt == 0:
                    # Finished (e.g. a resume within the TTL): its status would be mistaken for this run's.
                    log.info("%s exists from an earlier run (exit %d); replacing it", handle.describe(), code)
                    handle.kill()
                    continue
                raise Unavailable(f"{handle.describe()} from an earlier run is still being deleted; retry shortly")
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise Unavailable(self._launch_error(name, f"API server unreachable: {type(exc).__name__}: {exc}"))
            break
        handle = KubernetesJobHandle(self.api, self.namespace, name)
        log.info("launched job %s as %s", job_id, handle.describe())
        return handle

    def _launch_error(self, name: str, what: str, exc: ApiException | None = None) -> str:
        message = f"cannot create Job {name} in namespace {self.namespace!r}: {what}"
        if exc is not None and exc.status == 403:
            message += (f"; the learner's service account needs create/get/delete on jobs.batch in namespace "
                        f"{self.namespace!r}")
        elif exc is not None and exc.status == 404:
            message += f"; does namespace {self.namespace!r} exist?"
        return message

    def reattach(self, job_id: str, job_dir: Path) -> JobHandle | None:
        """A handle to the job's Job when it exists (running or finished), None when it is gone.

        Raises Unavailable when the API server cannot say (the Job might still run).
        """
        name = job_name(job_id)
        try:
            self.api.read_namespaced_job(name, self.namespace, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise Unavailable(f"cannot read Job {name} in namespace {self.namespace!r}: {_reason(exc)}")
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unavailable(f"cannot read Job {name} in namespace {self.namespace!r}: API server unreachable "
                              f"({type(exc).__name__}: {exc})")
        return KubernetesJobHandle(self.api, self.namespace, name)
