"""The Kubernetes manifests (deploy/k8s): base and the kind and gpu overlays, rendered by kustomize.

Every rendered object is validated against the Kubernetes API schemas in strict mode (an unknown or
misspelt field fails), then checked against what the code needs: the settings names and values the
services read (rlgpt/config.py, services/<service>/settings.py), the gRPC and metrics ports, the calls
the learner's Kubernetes runner makes (services/learner/k8s.py), the labels of its training Jobs, and
who may talk to whom.
Needs `kubectl` (its built-in kustomize); `make setup` installs it.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
import pytest
import yaml

from rlgpt.config import LLMSettings, ServerSettings, Settings
from rlgpt.v1 import learner_pb2
from services.critic.settings import CriticSettings
from services.env_server.settings import EnvServerSettings
from services.learner import k8s as learner_k8s
from services.learner.settings import LearnerSettings
from services.planner.settings import PlannerSettings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
MONITORING = K8S / "monitoring"
TARGETS = {"base": K8S / "base", "kind": K8S / "overlays" / "kind", "gpu": K8S / "overlays" / "gpu"}
DEPLOYABLE = ("kind", "gpu")  # base is never applied alone: it has no monitoring
KUBERNETES_VERSION = "1.32.0"  # the kubectl make setup installs; kubernetes-validate ships its schemas
NAMESPACE = "rlgpt"
RLGPT_UID = 10001
METRICS_PORT = 9100
GPU = "nvidia.com/gpu"
REGISTRY = "registry.example.com/"


@dataclasses.dataclass(frozen=True)
class Service:
    command: str  # rlgpt serve <command>
    port: int
    settings: tuple[type[Settings], ...]


SERVICES = {
    "env-server": Service("env", 50051, (EnvServerSettings,)),
    "planner": Service("planner", 50052, (PlannerSettings, LLMSettings)),
    "learner": Service("learner", 50053, (LearnerSettings,)),
    "critic": Service("critic", 50054, (CriticSettings, LLMSettings)),
}
LLM = "<llm>"  # the Deployment labelled app.kubernetes.io/component: llm (llama.cpp or vLLM)
LEARNER_JOB = "<training job>"  # a pod of a Job the learner's Kubernetes runner creates
OUTSIDE = "<outside>"  # a NodePort, another namespace
# (source, destination, destination port name)
MUST_REACH = [
    ("planner", "env-server", "grpc"), ("planner", "learner", "grpc"), ("planner", "critic", "grpc"),
    ("learner", "env-server", "grpc"), (LEARNER_JOB, "env-server", "grpc"),
    ("planner", LLM, "http"), ("critic", LLM, "http"),
    *[("prometheus", name, "metrics") for name in SERVICES],
    ("grafana", "prometheus", "web"),
    (OUTSIDE, "planner", "grpc"), (OUTSIDE, "grafana", "http"),
]
MUST_NOT_REACH = [
    ("learner", LLM, "http"), ("env-server", LLM, "http"), (LEARNER_JOB, LLM, "http"), (OUTSIDE, LLM, "http"),
    ("critic", "env-server", "grpc"), ("grafana", "env-server", "grpc"), (OUTSIDE, "env-server", "grpc"),
    ("env-server", "learner", "grpc"), ("critic", "learner", "grpc"), (LEARNER_JOB, "learner", "grpc"),
    ("learner", "critic", "grpc"), (OUTSIDE, "learner", "grpc"), (OUTSIDE, "critic", "grpc"),
    ("planner", "env-server", "metrics"), (OUTSIDE, "planner", "metrics"), (OUTSIDE, "prometheus", "web"),
]


# --- rendering -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Manifests:
    objects: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def find(self, kind: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self.of_kind(kind) if o["metadata"]["name"] == name), None)

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found = self.find(kind, name)
        assert found is not None, f"no {kind} {name!r} in the rendered manifests"
        return found

    @property
    def deployments(self) -> dict[str, dict[str, Any]]:
        return {d["metadata"]["name"]: d for d in self.of_kind("Deployment")}

    def container(self, deployment: str) -> dict[str, Any]:
        return self.get("Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]

    def env(self, deployment: str) -> dict[str, str]:
        """What the first container's process sees: envFrom sources, then env (which wins)."""
        container, env = self.container(deployment), {}
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                env.update(self.get("ConfigMap", source["configMapRef"]["name"]).get("data", {}))
            elif "secretRef" in source:
                env.update(dict.fromkeys(secret_keys(self.get("Secret", source["secretRef"]["name"])), "<secret>"))
        for var in container.get("env", []):
            env[var["name"]] = var.get("value", "<valueFrom>")
        return env

    def llm_deployment(self) -> str:
        names = [name for name, d in self.deployments.items()
                 if d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == "llm"]
        assert len(names) == 1, f"expected one LLM Deployment (component: llm), found {names}"
        return names[0]


def render(path: Path) -> Manifests:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed: run `make setup` (it installs kubectl, whose built-in kustomize "
                    "renders deploy/k8s)")
    proc = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.fail(f"kubectl kustomize {path.relative_to(ROOT)} failed:\n{proc.stderr}")
    return Manifests([o for o in yaml.safe_load_all(proc.stdout) if o])


@pytest.fixture(scope="module")
def rendered() -> dict[str, Manifests]:
    return {name: render(path) for name, path in TARGETS.items()}


# --- helpers ---------------------------------------------------------------------------------------

def secret_keys(secret: dict[str, Any]) -> set[str]:
    return set(secret.get("data", {})) | set(secret.get("stringData", {}))


def pod_specs(m: Manifests) -> dict[str, dict[str, Any]]:
    return {name: d["spec"]["template"]["spec"] for name, d in m.deployments.items()}


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return pod["containers"] + pod.get("initContainers", [])


def ports_by_name(pod: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for c in pod["containers"] for p in c.get("ports", []) if "name" in p}


_UNITS = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(value: str | int) -> float:
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value)).groups()  # type: ignore[union-attr]
    return float(number) * (_UNITS[unit] if unit else 1)


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels + matchExpressions) against a pod's labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def training_job(m: Manifests) -> dict[str, Any]:
    """The Job the learner's Kubernetes runner would create with these settings (a GPU training)."""
    settings = LearnerSettings.load(environ=m.env("learner"))
    job_dir = Path(settings.run_dir) / "jobs" / "job-1"
    return learner_k8s.build_job_manifest("job-1", job_dir, learner_pb2.RLConfig(gpu=True), settings)


@dataclasses.dataclass
class Pod:
    labels: dict[str, str] | None  # None: not a pod of this namespace
    ports: dict[str, int]


def pods(m: Manifests) -> dict[str, Pod]:
    found = {name: Pod(d["spec"]["template"]["metadata"]["labels"], ports_by_name(d["spec"]["template"]["spec"]))
             for name, d in m.deployments.items()}
    found[LEARNER_JOB] = Pod(training_job(m)["spec"]["template"]["metadata"]["labels"], {})
    found[OUTSIDE] = Pod(None, {})
    return found


def ingress_allowed(policies: list[dict[str, Any]], source: Pod, dest: Pod, port_name: str) -> bool:
    """Whether NetworkPolicies let ``source`` open a TCP connection to ``dest``'s named port."""
    number = dest.ports[port_name]
    assert dest.labels is not None
    isolating = [p["spec"] for p in policies if "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
                 and selects(p["spec"]["podSelector"], dest.labels)]
    if not isolating:
        return True
    for spec in isolating:
        for rule in spec.get("ingress", []):
            ports_ok = not rule.get("ports") or any(
                p.get("protocol", "TCP") == "TCP"
                and ("port" not in p or p["port"] == port_name
                     or (isinstance(p["port"], int) and p["port"] <= number <= p.get("endPort", p["port"])))
                for p in rule["ports"])
            peers = rule.get("from")
            for peer in peers or []:
                assert set(peer) == {"podSelector"}, f"this check knows only podSelector peers, not {peer}"
            from_ok = not peers or (source.labels is not None
                                    and any(selects(peer["podSelector"], source.labels) for peer in peers))
            if ports_ok and from_ok:
                return True
    return False


def valid_setting_names() -> set[str]:
    """RLGPT_<PREFIX>_<FIELD> of the settings dataclasses the services load."""
    classes = {ServerSettings} | {c for service in SERVICES.values() for c in service.settings}
    return {f"{c.env_prefix}_{f.name.upper()}" for c in classes for f in dataclasses.fields(c)}


# --- every target ------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_objects_validate_against_the_api_schemas_strictly(rendered: dict[str, Manifests], target: str) -> None:
    problems = []
    for obj in rendered[target].objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{where}: {'.'.join(map(str, exc.path))}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{where}: {exc.message}")
        if obj["kind"] != "Namespace" and obj["metadata"].get("namespace") != NAMESPACE:
            problems.append(f"{where}: not in namespace {NAMESPACE}")
    assert not problems, "\n".join(problems)
    assert {"Deployment", "Service", "ConfigMap", "NetworkPolicy", "Role"} <= {o["kind"] for o in
                                                                              rendered[target].objects}


@pytest.mark.parametrize("target", TARGETS)
def test_every_container_has_requests_within_limits(rendered: dict[str, Manifests], target: str) -> None:
    problems = []
    for name, pod in pod_specs(rendered[target]).items():
        for c in containers(pod):
            resources = c.get("resources", {})
            requests, limits = resources.get("requests", {}), resources.get("limits", {})
            for kind in ("cpu", "memory"):
                if kind not in requests or kind not in limits:
                    problems.append(f"{name}/{c['name']}: no {kind} request and limit")
                elif quantity(requests[kind]) > quantity(limits[kind]):
                    problems.append(f"{name}/{c['name']}: {kind} request {requests[kind]} > limit {limits[kind]}")
            if requests.get(GPU) != limits.get(GPU):  # extended resources cannot be overcommitted
                problems.append(f"{name}/{c['name']}: {GPU} request {requests.get(GPU)} != limit {limits.get(GPU)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("target", TARGETS)
def test_pods_run_unprivileged(rendered: dict[str, Manifests], target: str) -> None:
    writable_root = {"vllm"}  # third-party server that writes caches where it likes
    api_users = {"learner", "prometheus"}  # the only pods that talk to the Kubernetes API
    problems = []
    for name, pod in pod_specs(rendered[target]).items():
        pod_sc = pod.get("securityContext", {})
        if pod_sc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problems.append(f"{name}: no RuntimeDefault seccomp profile")
        if name not in api_users and pod.get("automountServiceAccountToken") is not False:
            problems.append(f"{name}: mounts a service account token it does not need")
        for c in containers(pod):
            sc = {**pod_sc, **c.get("securityContext", {})}
            where = f"{name}/{c['name']}"
            if sc.get("runAsNonRoot") is not True or not sc.get("runAsUser"):
                problems.append(f"{where}: not runAsNonRoot with a non-zero runAsUser")
            if "rlgpt/" in c["image"] and sc.get("runAsUser") != RLGPT_UID:
                problems.append(f"{where}: rlgpt images run as uid {RLGPT_UID}, not {sc.get('runAsUser')}")
            if sc.get("allowPrivilegeEscalation") is not False or sc.get("privileged"):
                problems.append(f"{where}: privilege escalation not disabled")
            if sc.get("capabilities", {}).get("drop") != ["ALL"] or sc.get("capabilities", {}).get("add"):
                problems.append(f"{where}: capabilities are not drop [ALL]")
            if name not in writable_root and sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{where}: root filesystem is writable")
            mounts = {v["mountPath"] for v in c.get("volumeMounts", [])}
            if "rlgpt/" in c["image"] and "/tmp" not in mounts:
                problems.append(f"{where}: no writable /tmp (HOME and caches live there)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", SERVICES)
def test_service_serves_grpc_and_metrics_on_its_ports(rendered: dict[str, Manifests], target: str,
                                                      name: str) -> None:
    m, service = rendered[target], SERVICES[name]
    deployment = m.get("Deployment", name)
    template = deployment["spec"]["template"]
    container = m.container(name)
    assert container["command"] == ["rlgpt", "serve", service.command]
    # The settings the process will load, through the real dataclasses (bad values raise ConfigError).
    env = m.env(name)
    server = ServerSettings.load(environ=env)
    for cls in service.settings:
        cls.load(environ=env)
    assert server.host == "0.0.0.0", "pods must bind every interface"
    assert (server.port, server.metrics_port) == (service.port, METRICS_PORT)
    ports = ports_by_name(template["spec"])
    assert ports == {"grpc": service.port, "metrics": METRICS_PORT}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == ports["grpc"], f"{probe} does not check the gRPC port"
    assert template["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT), "prometheus.io/path": "/metrics"}
    assert template["metadata"]["labels"] == {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "rlgpt"}


@pytest.mark.parametrize("target", TARGETS)
def test_every_rlgpt_variable_is_a_real_setting(rendered: dict[str, Manifests], target: str) -> None:
    m, valid = rendered[target], valid_setting_names()
    used = {key for cm in m.of_kind("ConfigMap") for key in cm.get("data", {}) if key.startswith("RLGPT_")}
    used |= {var["name"] for pod in pod_specs(m).values() for c in containers(pod) for var in c.get("env", [])
             if var["name"].startswith("RLGPT_")}
    assert len(used) > 10, f"expected the settings ConfigMap, found only {sorted(used)}"
    assert not used - valid, f"not a field of any service's settings dataclass: {sorted(used - valid)}"


@pytest.mark.parametrize("target", TARGETS)
def test_service_selectors_and_ports_match_deployments(rendered: dict[str, Manifests], target: str) -> None:
    m, problems = rendered[target], []
    templates = {name: d["spec"]["template"] for name, d in m.deployments.items()}
    for svc in m.of_kind("Service"):
        name, selector = svc["metadata"]["name"], svc["spec"].get("selector", {})
        matched = [d for d, t in templates.items() if selects({"matchLabels": selector}, t["metadata"]["labels"])]
        if not selector or not matched:
            problems.append(f"Service {name}: selector {selector} matches no Deployment's pods")
        for port in svc["spec"]["ports"]:
            target_port = port.get("targetPort", port["port"])
            for d in matched:
                numbers = ports_by_name(templates[d]["spec"])
                if target_port not in numbers and target_port not in numbers.values():
                    problems.append(f"Service {name}: targetPort {target_port} is not a port of {d}")
    for d in m.deployments.values():  # a Deployment's selector must select its own template
        if not selects(d["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"]):
            problems.append(f"Deployment {d['metadata']['name']}: selector does not match its pod template")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("target", TARGETS)
def test_addresses_in_the_settings_reach_the_right_pods(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]
    planner = PlannerSettings.load(environ=m.env("planner"))
    learner = LearnerSettings.load(environ=m.env("learner"))
    addresses = {planner.env_server: "env-server", planner.learner: "learner", planner.critic: "critic",
                 learner.env_server: "env-server"}
    for role in ("planner", "critic"):
        url = re.fullmatch(r"http://([a-z0-9-]+):(\d+)/v1", LLMSettings.load(environ=m.env(role)).base_url)
        assert url, f"{role}: RLGPT_LLM_BASE_URL is not an in-cluster http://SERVICE:PORT/v1"
        addresses[f"{url[1]}:{url[2]}"] = m.llm_deployment()
    for address, deployment in addresses.items():
        host, port = address.rsplit(":", 1)
        svc = m.get("Service", host)
        svc_port = next((p for p in svc["spec"]["ports"] if p["port"] == int(port)), None)
        assert svc_port, f"{address}: Service {host} has no port {port}"
        template = m.get("Deployment", deployment)["spec"]["template"]
        assert selects({"matchLabels": svc["spec"]["selector"]}, template["metadata"]["labels"]), \
            f"{address}: Service {host} does not select {deployment}"



@pytest.mark.parametrize("target", ["base", "kind"])
def test_llama_cpp_server_is_probed_on_its_openai_api(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]
    assert m.llm_deployment() == "llm"
    container = m.container("llm")
    assert ports_by_name(m.get("Deployment", "llm")["spec"]["template"]["spec"]) == {"http": 8080}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/v1/models", "port": "http"}
    threads = int(m.env("llm")["RLGPT_LLM_LOCAL_THREADS"])
    assert threads <= quantity(container["resources"]["limits"]["cpu"]), "more threads than CPUs"

@pytest.mark.parametrize("target", TARGETS)
def test_llm_key_comes_from_the_secret_the_settings_name(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]
    for role in ("planner", "critic"):
        key_env = LLMSettings.load(environ=m.env(role)).api_key_env
        var = next((v for v in m.container(role).get("env", []) if v["name"] == key_env), None)
        assert var is not None, f"{role}: no {key_env} (RLGPT_LLM_API_KEY_ENV) in its env"
        ref = var["valueFrom"]["secretKeyRef"]
        assert ref["key"] in secret_keys(m.get("Secret", ref["name"]))


@pytest.mark.parametrize("target", TARGETS)
def test_learner_role_grants_exactly_what_its_kubernetes_runner_calls(rendered: dict[str, Manifests],
                                                                      target: str) -> None:
    m = rendered[target]
    # The API methods services/learner/k8s.py calls (self.api.<method>), as (group, resource, verb).
    source = ast.parse(Path(learner_k8s.__file__).read_text())
    methods = {node.func.attr for node in ast.walk(source)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "api"}
    verbs = {"create": "create", "read": "get", "delete": "delete", "list": "list", "patch": "patch",
             "replace": "update"}
    groups = {"job": "batch", "pod": ""}
    needed = set()
    for method in methods:
        match = re.fullmatch(r"(create|read|delete|list|patch|replace)_namespaced_(job|pod)(?:_(status|log))?",
                             method)
        assert match, f"k8s.py calls {method}: teach this test its RBAC verb"
        verb, kind, sub = match.groups()
        needed.add((groups[kind], f"{kind}s/{sub}" if sub else f"{kind}s", verbs[verb]))
    assert ("batch", "jobs", "create") in needed  # the parser found the calls

    deployment = m.get("Deployment", "learner")["spec"]["template"]["spec"]
    account = deployment["serviceAccountName"]
    m.get("ServiceAccount", account)
    bindings = [b for b in m.of_kind("RoleBinding")
                if {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE} in b["subjects"]]
    assert len(bindings) == 1 and bindings[0]["roleRef"]["kind"] == "Role"
    role = m.get("Role", bindings[0]["roleRef"]["name"])
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted == needed, f"missing {sorted(needed - granted)}, not needed {sorted(granted - needed)}"
    assert not m.of_kind("ClusterRole") and not m.of_kind("ClusterRoleBinding"), "nothing needs cluster-wide rights"
    assert LearnerSettings.load(environ=m.env("learner")).k8s_namespace == NAMESPACE


@pytest.mark.parametrize("target", TARGETS)
def test_training_jobs_fit_the_cluster(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]
    job = training_job(m)
    kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
    assert job["metadata"]["namespace"] == NAMESPACE
    pod = job["spec"]["template"]["spec"]
    claim = next(v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v)
    m.get("PersistentVolumeClaim", claim)
    # Training Jobs run the learner's own image (the CUDA build on gpu).
    assert pod["containers"][0]["image"] == m.container("learner")["image"]
    # The Job mounts the whole claim at the run dir; the learner must see it at the same path so that
    # job directories mean the same thing on both sides (k8s.py's path translation is the identity).
    settings = LearnerSettings.load(environ=m.env("learner"))
    learner_pod = m.get("Deployment", "learner")["spec"]["template"]["spec"]
    volume = next(v["name"] for v in learner_pod["volumes"]
                  if v.get("persistentVolumeClaim", {}).get("claimName") == claim)
    mount = next(v for v in m.container("learner")["volumeMounts"] if v["name"] == volume)
    assert mount["mountPath"] == settings.run_dir and "subPath" not in mount
    assert str(learner_k8s.container_run_dir(settings)) == settings.run_dir


@pytest.mark.parametrize("target", DEPLOYABLE)
def test_training_jobs_run_as_the_learner_user(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]
    job_sc = training_job(m)["spec"]["template"]["spec"]["securityContext"]
    learner_sc = m.get("Deployment", "learner")["spec"]["template"]["spec"]["securityContext"]
    assert job_sc["runAsUser"] == learner_sc["runAsUser"] and job_sc["fsGroup"] == learner_sc["fsGroup"]


@pytest.mark.parametrize("target", TARGETS)
def test_planner_writes_runs_to_the_claim(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]
    settings = PlannerSettings.load(environ=m.env("planner"))
    pod = m.get("Deployment", "planner")["spec"]["template"]["spec"]
    claims = {v["name"] for v in pod["volumes"] if v.get("persistentVolumeClaim", {}).get("claimName") == "rlgpt-runs"}
    mounts = [PurePosixPath(v["mountPath"]) for v in m.container("planner")["volumeMounts"] if v["name"] in claims]
    for path in (settings.run_dir, settings.library_path):
        assert any(PurePosixPath(path).is_relative_to(mount) for mount in mounts), f"{path} is not on rlgpt-runs"


# --- deployable overlays -------------------------------------------------------------------------------

@pytest.mark.parametrize("target", DEPLOYABLE)
def test_network_policies_select_real_pods(rendered: dict[str, Manifests], target: str) -> None:
    m, problems = rendered[target], []
    everyone = {name: pod for name, pod in pods(m).items() if pod.labels is not None}
    for policy in m.of_kind("NetworkPolicy"):
        name, spec = policy["metadata"]["name"], policy["spec"]
        selected = [p for p, pod in everyone.items() if selects(spec["podSelector"], pod.labels or {})]
        if not selected:
            problems.append(f"{name}: podSelector selects no pod")
        for rule in spec.get("ingress", []):
            for peer in rule.get("from", []):
                if not any(selects(peer["podSelector"], pod.labels or {}) for pod in everyone.values()):
                    problems.append(f"{name}: from {peer['podSelector']} matches no pod")
            for port in rule.get("ports", []):
                if isinstance(port.get("port"), str) and not any(port["port"] in everyone[p].ports for p in selected):
                    problems.append(f"{name}: no selected pod has a port named {port['port']}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("target", DEPLOYABLE)
def test_network_policies_allow_exactly_the_needed_traffic(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]
    everyone, policies = pods(m), m.of_kind("NetworkPolicy")
    names = {LLM: m.llm_deployment()}
    wrong = []
    for expected, pairs in ((True, MUST_REACH), (False, MUST_NOT_REACH)):
        for source, dest, port in pairs:
            src, dst = everyone[names.get(source, source)], everyone[names.get(dest, dest)]
            if ingress_allowed(policies, src, dst, port) != expected:
                wrong.append(f"{source} -> {dest}:{port} should be {'allowed' if expected else 'denied'}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("target", DEPLOYABLE)
def test_monitoring_config_files_are_in_generated_configmaps(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]

    def mounted(deployment: str) -> dict[str, tuple[str, dict[str, str]]]:
        """mountPath -> (ConfigMap name, data) for the ConfigMap volumes of a Deployment."""
        pod = m.get("Deployment", deployment)["spec"]["template"]["spec"]
        maps = {v["name"]: v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
        return {mount["mountPath"]: (maps[mount["name"]], m.get("ConfigMap", maps[mount["name"]])["data"])
                for mount in pod["containers"][0]["volumeMounts"] if mount["name"] in maps}

    prometheus = mounted("prometheus")
    args = m.container("prometheus")["args"]
    config_file = PurePosixPath(next(a.split("=", 1)[1] for a in args if a.startswith("--config.file=")))
    _, data = prometheus[str(config_file.parent)]
    for key in ("prometheus.yml", "rules.yml"):
        assert data[key] == (MONITORING / "prometheus" / key).read_text(), f"{key} differs from the file"
    assert config_file.name == "prometheus.yml"
    for rule_file in yaml.safe_load(data["prometheus.yml"]).get("rule_files") or []:
        path = config_file.parent / rule_file  # relative names are relative to the config file
        assert path.parent == config_file.parent and path.name in data, f"rule file {rule_file} is not mounted"

    grafana = mounted("grafana")
    _, datasources = grafana["/etc/grafana/provisioning/datasources"]
    assert datasources["datasources.yaml"] == (MONITORING / "grafana/provisioning/datasources.yaml").read_text()
    url = yaml.safe_load(datasources["datasources.yaml"])["datasources"][0]["url"]
    host, port = re.fullmatch(r"http://([a-z0-9-]+):(\d+)", url).groups()  # type: ignore[union-attr]
    assert int(port) in [p["port"] for p in m.get("Service", host)["spec"]["ports"]]
    _, providers = grafana["/etc/grafana/provisioning/dashboards"]
    dashboards_path = yaml.safe_load(providers["dashboards.yaml"])["providers"][0]["options"]["path"]
    _, dashboards = grafana[dashboards_path]
    files = sorted((MONITORING / "grafana" / "dashboards").glob("*.json"))
    assert "rlgpt-training.json" in [f.name for f in files]
    for file in files:  # every dashboard in the directory is provisioned, unchanged
        assert dashboards.get(file.name) == file.read_text(), f"{file.name} is not in the dashboards ConfigMap"

    role = m.get("Role", "prometheus-discovery")
    assert any("pods" in r["resources"] and {"list", "watch"} <= set(r["verbs"]) for r in role["rules"])
    assert m.get("Deployment", "prometheus")["spec"]["template"]["spec"]["serviceAccountName"] == "prometheus"


# --- per overlay -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_training_sessions_spread_over_every_env_server_pod(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]
    learner = LearnerSettings.load(environ=m.env("learner"))
    assert learner.env_servers.startswith("dns:///"), "the learner resolves the env-server pods itself"
    host, port = learner.env_servers.removeprefix("dns:///").rsplit(":", 1)
    svc = m.get("Service", host)
    assert svc["spec"]["clusterIP"] == "None", "a headless Service: DNS answers one address per pod"
    assert any(p["port"] == int(port) and p["targetPort"] == "grpc" for p in svc["spec"]["ports"])
    template = m.get("Deployment", "env-server")["spec"]["template"]
    assert selects({"matchLabels": svc["spec"]["selector"]}, template["metadata"]["labels"])


@pytest.mark.parametrize("target", ["base", "gpu"])
def test_env_server_scales_horizontally(rendered: dict[str, Manifests], target: str) -> None:
    m = rendered[target]
    hpa = m.get("HorizontalPodAutoscaler", "env-server")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "env-server"}
    assert [x["resource"]["name"] for x in hpa["spec"]["metrics"]] == ["cpu"]
    assert hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"] >= 1
    assert "replicas" not in m.get("Deployment", "env-server")["spec"], "the HPA owns the replica count"
    assert "cpu" in m.container("env-server")["resources"]["requests"], "CPU utilization needs a CPU request"
    assert m.get("Service", "env-server")["spec"]["sessionAffinity"] == "ClientIP"


def test_gpu_overlay_serves_vllm_on_a_gpu(rendered: dict[str, Manifests]) -> None:
    m = rendered["gpu"]
    assert m.llm_deployment() == "vllm" and m.find("Deployment", "llm") is None
    pod = m.get("Deployment", "vllm")["spec"]["template"]["spec"]
    container = m.container("vllm")
    assert container["image"] == "vllm/vllm-openai:v0.6.3"
    assert container["resources"]["limits"][GPU] == container["resources"]["requests"][GPU] == "1"
    for name in ("vllm", "learner"):
        spec = m.get("Deployment", name)["spec"]["template"]["spec"]
        assert spec["nodeSelector"], f"{name}: no GPU node selector"
        assert any(t["key"] == GPU and t["effect"] == "NoSchedule" for t in spec["tolerations"])
    served = next(a.split("=", 1)[1] for a in container["args"] if a.startswith("--served-model-name="))
    for role in ("planner", "critic"):
        llm = LLMSettings.load(environ=m.env(role))
        assert llm.model == served and llm.structured == "json_schema"
    assert pod["volumes"]


def test_gpu_overlay_trains_with_kubernetes_jobs_from_the_registry(rendered: dict[str, Manifests]) -> None:
    m = rendered["gpu"]
    settings = LearnerSettings.load(environ=m.env("learner"))
    assert settings.runner == "kubernetes" and settings.k8s_in_cluster
    assert settings.k8s_image == f"{REGISTRY}rlgpt/learner-cuda:dev" == m.container("learner")["image"]
    assert training_job(m)["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] == "1"
    for pod in pod_specs(m).values():
        for c in containers(pod):
            assert "rlgpt/" not in c["image"] or c["image"].startswith(REGISTRY), c["image"]
    assert m.get("PersistentVolumeClaim", "rlgpt-runs")["spec"]["accessModes"] == ["ReadWriteMany"]


def test_kind_overlay_runs_local_images_one_replica_each(rendered: dict[str, Manifests]) -> None:
    m = rendered["kind"]
    assert not m.of_kind("HorizontalPodAutoscaler"), "kind has no metrics-server"
    assert LearnerSettings.load(environ=m.env("learner")).runner == "local"
    script = (ROOT / "deploy" / "scripts" / "kind.sh").read_text()
    loaded = set(re.search(r"^IMAGES=\((.*)\)$", script, re.M)[1].split())  # type: ignore[index]
    for name, d in m.deployments.items():
        assert d["spec"].get("replicas", 1) == 1, name
        for c in containers(d["spec"]["template"]["spec"]):
            if c["image"].startswith("rlgpt/"):
                assert c.get("imagePullPolicy") == "Never", f"{name}: {c['image']} is in no registry"
                assert c["image"] in loaded, f"kind.sh does not load {c['image']}"
            assert not c["image"].endswith(":latest") and ":" in c["image"], f"{name}: unpinned {c['image']}"


def test_kind_cluster_maps_the_overlay_node_ports(rendered: dict[str, Manifests]) -> None:
    cluster = yaml.safe_load((ROOT / "deploy" / "kind" / "cluster.yaml").read_text())
    assert [n["role"] for n in cluster["nodes"]] == ["control-plane", "worker"]
    mapped = {p["containerPort"]: p["hostPort"] for n in cluster["nodes"] for p in n.get("extraPortMappings", [])}
    node_ports = {p["nodePort"]: svc["metadata"]["name"] for svc in rendered["kind"].of_kind("Service")
                  if svc["spec"].get("type") == "NodePort" for p in svc["spec"]["ports"]}
    assert set(mapped) == set(node_ports), f"mapped {mapped}, NodePorts {node_ports}"
    assert mapped[next(p for p, s in node_ports.items() if s == "planner")] == SERVICES["planner"].port


def test_kind_script_fails_clearly_without_kind(tmp_path: Path) -> None:
    script, bash = ROOT / "deploy" / "scripts" / "kind.sh", shutil.which("bash")
    assert bash and subprocess.run([bash, "-n", str(script)]).returncode == 0
    bin_dir = tmp_path / "bin"  # a PATH with what the script needs before it looks for kind, and no kind
    bin_dir.mkdir()
    for tool in ("dirname", "sed"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    env = {"PATH": str(bin_dir)}
    for command in ("up", "down"):
        proc = subprocess.run([bash, str(script), command, "test"], capture_output=True, text=True, env=env,
                              timeout=30)
        assert proc.returncode != 0 and "'kind' is not installed" in proc.stderr, proc.stderr
    usage = subprocess.run([bash, str(script)], capture_output=True, text=True, env=env, timeout=30)
    assert usage.returncode == 2 and "deploy CLUSTER" in usage.stderr
