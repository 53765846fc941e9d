"""The Kubernetes job runner: each training job runs as a ``batch/v1`` Job, created, polled and
deleted through the API server.

The Job itself (paths, names, resources, security) is built by :mod:`services.learner.k8s_manifest`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import kubernetes.client
import kubernetes.config
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from rlgpt.errors import FailedPrecondition, Unavailable
from rlgpt.v1 import learner_pb2
from services.learner.jobs import JobHandle, JobRunner
from services.learner.k8s_manifest import build_job_manifest, container_run_dir, job_name
from services.learner.settings import LearnerSettings

__all__ = ["KubernetesJobHandle", "KubernetesRunner", "build_job_manifest", "container_run_dir", "job_name"]
"""``build_job_manifest`` and ``container_run_dir`` are kept importable from here for older callers."""

log = logging.getLogger(__name__)

# (connect, read) seconds per API call: a hung API server must not hang the learner's watchdog.
REQUEST_TIMEOUT = (5.0, 30.0)


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
