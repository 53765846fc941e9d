"""The helpers of the image builds: per-image requirements from pyproject.toml, the `podman play kube` filter."""

from __future__ import annotations

import base64
import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


requirements = _load(ROOT / "deploy" / "docker" / "requirements.py")
kube_filter = _load(ROOT / "deploy" / "scripts" / "kube_filter.py")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_requirements_per_image_follow_the_extras() -> None:
    env = requirements.requirements(PROJECT, base=True, extras=["env"], picks=[])
    assert env[: len(PROJECT["dependencies"])] == PROJECT["dependencies"]
    assert any(r.startswith("crafter") for r in env) and not any(r.startswith("torch") for r in env)
    learner = requirements.requirements(PROJECT, base=True, extras=["learner"], picks=[])
    assert "torch==2.13.0" in learner and not any(r.startswith("llama") for r in learner)
    llm = requirements.requirements(PROJECT, base=False, extras=[], picks=["llama_cpp_python", "grpcio"])
    assert [r.split(">")[0].split("[")[0] for r in llm] == ["llama-cpp-python", "grpcio"]


def test_requirements_refuse_unknown_names(capsys) -> None:
    assert requirements.main([str(ROOT / "pyproject.toml"), "--extra", "nope"]) == 2
    assert "no extra 'nope'" in capsys.readouterr().err


def _deployment(name: str, image: str, **container: object) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "rlgpt"},
            "spec": {"template": {"spec": {"serviceAccountName": "x", "volumes": [
                {"name": "runs", "persistentVolumeClaim": {"claimName": "runs"}}],
                "containers": [{"name": name, "image": image, **container}]}}}}


def test_kube_filter_keeps_what_podman_plays() -> None:
    secret = {"kind": "Secret", "metadata": {"name": "llm"},
              "data": {"OPENAI_API_KEY": base64.b64encode(b"k").decode()}}
    planner = _deployment(
        "planner", "rlgpt/planner:dev", readinessProbe={"grpc": {"port": 50052}},
        envFrom=[{"configMapRef": {"name": "settings"}}],
        env=[{"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "OPENAI_API_KEY"}}}])
    docs = [{"kind": "Namespace", "metadata": {"name": "rlgpt"}}, secret, planner,
            _deployment("grafana", "grafana/grafana:11.1.0"),
            {"kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {}},
            {"kind": "ConfigMap", "metadata": {"name": "dashboards"}, "data": {}},
            {"kind": "PersistentVolumeClaim", "metadata": {"name": "runs"}, "spec": {}},
            {"kind": "Service", "metadata": {"name": "planner"}},
            {"kind": "NetworkPolicy", "metadata": {"name": "deny"}}]
    kept, notes = kube_filter.filter_docs(docs, {"localhost/rlgpt/planner:dev"})
    assert [(d["kind"], d["metadata"]["name"]) for d in kept] == [
        ("Deployment", "planner"), ("ConfigMap", "settings"), ("PersistentVolumeClaim", "runs")]
    container = kept[0]["spec"]["template"]["spec"]["containers"][0]
    assert "readinessProbe" not in container and container["env"] == [{"name": "OPENAI_API_KEY", "value": "k"}]
    assert "serviceAccountName" not in kept[0]["spec"]["template"]["spec"]
    assert "namespace" not in kept[0]["metadata"]
    text = "\n".join(notes)
    for dropped in ("Deployment grafana", "ConfigMap dashboards", "1 Service", "1 NetworkPolicy", "1 Namespace"):
        assert dropped in text


def test_kube_filter_renders_the_kind_overlay_when_kubectl_is_there(tmp_path) -> None:
    import shutil
    import subprocess

    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not installed: run `make setup` (it installs kubectl, whose kustomize renders "
                    "deploy/k8s)")
    rendered = subprocess.run(["kubectl", "kustomize", str(ROOT / "deploy/k8s/overlays/kind")], check=True,
                              capture_output=True, text=True).stdout
    images = [f"rlgpt/{n}:dev" for n in ("env-server", "learner", "planner", "critic", "llm")]
    kept, _ = kube_filter.filter_docs([d for d in yaml.safe_load_all(rendered) if d], set(images))
    names = {d["metadata"]["name"] for d in kept if d["kind"] == "Deployment"}
    assert names == {"env-server", "learner", "planner", "critic", "llm"}
    assert {d["kind"] for d in kept} <= {"Deployment", "ConfigMap", "PersistentVolumeClaim"}
