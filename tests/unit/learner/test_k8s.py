"""The kubernetes runner: its Job manifest against the real Kubernetes schema (offline, with
``kubernetes-validate``). Its API calls against ``fake_kube_api``, a TEST DOUBLE of the API server served over HTTP,
are tested in tests/integration/learner/test_k8s_api.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes.client
import kubernetes.config.kube_config
import kubernetes_validate
import pytest
from k8s_support import JOB_DIR, JOB_ID, NS, SETTINGS, container, rl_config

from rlgpt.errors import FailedPrecondition, InvalidArgument
from services.learner.jobs import train_command
from services.learner.k8s import KubernetesRunner
from services.learner.k8s_manifest import build_job_manifest, job_name
from services.learner.settings import LearnerSettings

# The newest schema kubernetes-validate 1.37.0 ships (kubernetes-json-schema/v1.37.0-local-strict).
KUBERNETES_VERSION = "1.37.0"
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
def validate(manifest: dict[str, Any]) -> None:
    kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


# --- the manifest ------------------------------------------------------------------------------------


def test_schema_version_is_the_newest_shipped() -> None:
    assert kubernetes_validate.latest_version() == KUBERNETES_VERSION


def test_cpu_manifest_is_a_valid_job_without_gpu() -> None:
    manifest = build_job_manifest(JOB_ID, JOB_DIR, rl_config(gpu=False), SETTINGS)
    validate(manifest)
    assert manifest["metadata"]["name"] == f"rlgpt-train-{JOB_ID}"
    assert manifest["metadata"]["namespace"] == NS
    assert manifest["metadata"]["labels"] == {"app.kubernetes.io/name": "rlgpt",
                                              "app.kubernetes.io/component": "learner-job",
                                              "rlgpt.dev/job-id": JOB_ID}
    spec = manifest["spec"]
    assert spec["backoffLimit"] == 0 and spec["ttlSecondsAfterFinished"] == 3600
    assert "activeDeadlineSeconds" not in spec
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert "tolerations" not in pod and "nodeSelector" not in pod
    train = container(manifest)
    assert train["name"] == "train" and train["image"] == SETTINGS.k8s_image
    assert train["command"] == train_command(JOB_DIR)
    env = {e["name"]: e["value"] for e in train["env"]}
    assert env["RLGPT_LEARNER_ENV_SERVER"] == "rlgpt-env:50051" and env["RLGPT_LEARNER_DEVICE"] == "cpu"
    assert train["resources"] == {"requests": {"cpu": "4", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}
    mounts = {m["mountPath"]: m["name"] for m in train["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/runs"]]["persistentVolumeClaim"] == {"claimName": "rlgpt-runs"}
    assert volumes[mounts["/dev/shm"]]["emptyDir"] == {"medium": "Memory"}


def test_gpu_manifest_asks_for_one_gpu_and_tolerates_gpu_nodes() -> None:
    manifest = build_job_manifest(JOB_ID, JOB_DIR, rl_config(gpu=True), SETTINGS)
    validate(manifest)
    resources = container(manifest)["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == "1" and resources["requests"]["nvidia.com/gpu"] == "1"
    assert manifest["spec"]["template"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    env = {e["name"]: e["value"] for e in container(manifest)["env"]}
    assert env["RLGPT_LEARNER_DEVICE"] == "cuda"


def test_schema_check_is_real() -> None:
    """The validator does reject a broken Job (so the passes above mean something)."""
    manifest = build_job_manifest(JOB_ID, JOB_DIR, rl_config(), SETTINGS)
    manifest["spec"]["template"]["spec"]["restartPolicy"] = 7
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(manifest)
    manifest = build_job_manifest(JOB_ID, JOB_DIR, rl_config(), SETTINGS)
    container(manifest)["imagePullPolicyy"] = "Always"  # strict: unknown fields are errors
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(manifest)


@pytest.mark.parametrize("job_id", [
    "x" * 200,
    "Run_With.Odd Chars/AND-CAPS-" + "9" * 60,
    "-leading-and-trailing-",
    "___",
])
def test_name_is_dns1123_and_short_for_any_job_id(job_id: str) -> None:
    manifest = build_job_manifest(job_id, Path("/runs/jobs") / "j", rl_config(), SETTINGS)
    validate(manifest)
    name = manifest["metadata"]["name"]
    assert len(name) <= 63 and DNS_1123_LABEL.match(name), name
    assert name.startswith("rlgpt-train-") and name == job_name(job_id)
    label = manifest["metadata"]["labels"]["rlgpt.dev/job-id"]
    assert len(label) <= 63 and re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", label)
    assert manifest["metadata"]["annotations"]["rlgpt.dev/job-id"] == job_id


def test_distinct_job_ids_get_distinct_names() -> None:
    assert job_name("Run_1") != job_name("run-1")
    assert job_name("a" * 100) != job_name("a" * 101)


def test_relative_run_dir_is_mounted_under_data() -> None:
    settings = LearnerSettings(run_dir="runs/learner")
    manifest = build_job_manifest(JOB_ID, Path("runs/learner/jobs") / JOB_ID, rl_config(), settings)
    validate(manifest)
    train = container(manifest)
    assert {m["mountPath"] for m in train["volumeMounts"]} == {"/data/runs/learner", "/dev/shm"}
    assert train["command"] == train_command(Path("/data/runs/learner/jobs") / JOB_ID)


def test_job_dir_outside_the_run_dir_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="not under the run dir"):
        build_job_manifest(JOB_ID, Path("/elsewhere/jobs") / JOB_ID, rl_config(), SETTINGS)


# --- the runner against the API-server test double ---------------------------------------------------


def test_missing_cluster_config_is_a_failed_precondition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "none"))
    with pytest.raises(FailedPrecondition, match="kube"):
        KubernetesRunner(SETTINGS)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(FailedPrecondition, match="in-cluster"):
        KubernetesRunner(LearnerSettings(k8s_in_cluster=True))
