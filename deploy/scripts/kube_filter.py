"""Keeps the parts of a rendered kustomize overlay that `podman play kube` (podman 4.3) can run locally.

    kubectl kustomize deploy/k8s/overlays/kind | python kube_filter.py --have-image rlgpt/planner:dev ... > play.yaml

Kept: Deployment, Pod, ConfigMap, PersistentVolumeClaim (podman makes a named volume of it). Secrets: podman 4.3
resolves secretKeyRef from its own secret store, not from Secret documents, so env values taken from a Secret in
the same YAML are inlined into the container env (a local run only; never do this for a cluster). Dropped, with
the reason printed to stderr: Namespace, Service (no cluster DNS or virtual IPs in podman), NetworkPolicy,
HorizontalPodAutoscaler, Role/RoleBinding/ServiceAccount (no API server), Deployments whose images are not in
local storage (e.g. Prometheus and Grafana, which would need a registry), and the ConfigMaps and claims that only
those used. gRPC probes are removed because podman 4.3 turns probes
into healthcheck timers it cannot run without systemd; the script checks gRPC health itself. Container ports are
removed too: podman 4.3 publishes every containerPort on the host's 0.0.0.0 (and all services share metrics port
9100, so the second pod would not even start); pods are reached at their own IPs on podman's bridge network.
"""

from __future__ import annotations

import argparse
import base64
import sys
from collections import Counter
from typing import Any

import yaml

KEEP = {"Deployment", "Pod", "ConfigMap", "PersistentVolumeClaim"}
WHY = {
    "Namespace": "podman has no namespaces",
    "Service": "no cluster DNS/virtual IPs in podman; services are reached at their pod IPs",
    "NetworkPolicy": "podman has no network policies",
    "HorizontalPodAutoscaler": "no autoscaler without a cluster",
    "Role": "no API server",
    "RoleBinding": "no API server",
    "ClusterRole": "no API server",
    "ClusterRoleBinding": "no API server",
    "ServiceAccount": "no API server",
    "Secret": "podman 4.3 reads secretKeyRef from its own secret store; the values used are inlined into env",
}
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def _image_name(image: str) -> str:
    """rlgpt/planner:dev, docker.io/rlgpt/planner:dev and localhost/rlgpt/planner:dev are the same local image."""
    for prefix in ("docker.io/library/", "docker.io/", "localhost/"):
        if image.startswith(prefix):
            return image[len(prefix):]
    return image


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"] if doc["kind"] == "Deployment" else doc["spec"]


def filter_docs(docs: list[dict[str, Any]], have_images: set[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The documents podman can play, and one line per thing dropped or changed."""
    have = {_image_name(i) for i in have_images}
    secrets: dict[str, dict[str, str]] = {}
    for doc in docs:
        if doc.get("kind") == "Secret":
            values = {k: base64.b64decode(v).decode() for k, v in (doc.get("data") or {}).items()}
            values.update(doc.get("stringData") or {})
            secrets[doc["metadata"]["name"]] = values
    kept: list[dict[str, Any]] = []
    notes: list[str] = []
    dropped = Counter()
    for doc in docs:
        kind = doc.get("kind", "")
        name = doc.get("metadata", {}).get("name", "?")
        if kind not in KEEP:
            dropped[kind] += 1
            continue
        doc.get("metadata", {}).pop("namespace", None)
        if kind in ("Deployment", "Pod"):
            spec = _pod_spec(doc)
            containers = spec.get("initContainers", []) + spec.get("containers", [])
            missing = sorted({c["image"] for c in containers if _image_name(c["image"]) not in have})
            if missing:
                notes.append(f"dropped {kind} {name}: image(s) not in local storage: {', '.join(missing)}")
                continue
            spec.pop("serviceAccountName", None)
            spec.pop("automountServiceAccountToken", None)
            for container in containers:
                if [p for p in PROBES if container.pop(p, None) is not None]:
                    notes.append(f"{kind} {name}/{container['name']}: probes removed (checked by the script)")
                if container.pop("ports", None):
                    notes.append(f"{kind} {name}/{container['name']}: ports removed (podman 4.3 would publish each "
                                 "containerPort on all host interfaces; the pod is reached at its own IP)")
                env = []
                for var in container.get("env", []):
                    ref = (var.get("valueFrom") or {}).get("secretKeyRef")
                    if ref is not None:
                        value = secrets.get(ref.get("name", ""), {}).get(ref.get("key", ""))
                        if value is not None:
                            env.append({"name": var["name"], "value": value})
                            notes.append(f"{kind} {name}/{container['name']}: env {var['name']} inlined from "
                                         f"Secret {ref.get('name')}")
                            continue
                        if ref.get("optional"):
                            continue
                    env.append(var)
                if "env" in container:
                    container["env"] = env
        kept.append(doc)
    used: set[tuple[str, str]] = set()
    for doc in kept:
        if doc["kind"] not in ("Deployment", "Pod"):
            continue
        spec = _pod_spec(doc)
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                used.add(("ConfigMap", volume["configMap"]["name"]))
            if "persistentVolumeClaim" in volume:
                used.add(("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]))
        for container in spec.get("initContainers", []) + spec.get("containers", []):
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    used.add(("ConfigMap", source["configMapRef"]["name"]))
            for var in container.get("env", []):
                ref = (var.get("valueFrom") or {}).get("configMapKeyRef")
                if ref is not None:
                    used.add(("ConfigMap", ref["name"]))
    unused = [d for d in kept if d["kind"] in ("ConfigMap", "PersistentVolumeClaim")
              and (d["kind"], d["metadata"]["name"]) not in used]
    for doc in unused:
        notes.append(f"dropped {doc['kind']} {doc['metadata']['name']}: used only by dropped workloads")
    kept = [d for d in kept if not any(d is u for u in unused)]
    for kind, count in sorted(dropped.items()):
        notes.append(f"dropped {count} {kind}: {WHY.get(kind, 'not supported by podman play kube')}")
    return kept, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--have-image", action="append", default=[], help="an image present in local storage")
    parser.add_argument("--configmaps-out", help="write the ConfigMaps to this file instead (podman play kube "
                                                 "--configmap FILE: podman 4.3 takes them there)")
    parser.add_argument("input", nargs="?", default="-", help="rendered YAML (default: stdin)")
    args = parser.parse_args(argv)
    if args.input == "-":
        text = sys.stdin.read()
    else:
        with open(args.input) as f:
            text = f.read()
    docs = [d for d in yaml.safe_load_all(text) if d]
    kept, notes = filter_docs(docs, set(args.have_image))
    for note in notes:
        print(f"kube_filter: {note}", file=sys.stderr)
    if not any(d["kind"] in ("Deployment", "Pod") for d in kept):
        print("kube_filter: nothing left to run", file=sys.stderr)
        return 1
    if args.configmaps_out:
        with open(args.configmaps_out, "w") as f:
            yaml.safe_dump_all([d for d in kept if d["kind"] == "ConfigMap"], f, sort_keys=False)
        kept = [d for d in kept if d["kind"] != "ConfigMap"]
    yaml.safe_dump_all(kept, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
