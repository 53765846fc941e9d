"""What the monitoring tests share: the files under deploy/k8s/monitoring, the Prometheus binaries, a real
Prometheus process, and small readers of PromQL (metric names, the measured side of an alert)."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MONITORING = ROOT / "deploy" / "k8s" / "monitoring"
PROMETHEUS_CONFIG = MONITORING / "prometheus" / "prometheus.yml"
RULES = MONITORING / "prometheus" / "rules.yml"
RULES_TEST = MONITORING / "prometheus" / "rules_test.yml"
DASHBOARD = MONITORING / "grafana" / "dashboards" / "rlgpt-training.json"
IN_CLUSTER_RULES = "/etc/prometheus/rules.yml"
SCRAPE_JOB = "rlgpt"


def require_tool(name: str) -> str:
    """The path of a Prometheus binary; fails (never skips) where it is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run `make setup` (deploy/scripts/setup-system.sh installs Debian's "
                    "prometheus package, which brings prometheus and promtool)")
    return path


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def rules() -> list[dict[str, Any]]:
    """Every rule of rules.yml (recording and alerting), in file order."""
    return [rule for group in load_yaml(RULES)["groups"] for rule in group["rules"]]


def dashboard_targets(dashboard: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(panel, target) for every query of the dashboard, rows' nested panels included."""
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                yield inner, target


def substitute(expr: str, window: str) -> str:
    """A panel query as Grafana sends it: every training job selected, the interval variables set to ``window``."""
    return expr.replace("$__rate_interval", window).replace("$__range", window).replace("$job", ".*")


# --- PromQL readers (enough for this repository's rules and panels; not a full parser) -------------------------
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
             "atan2", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The series names an expression selects (raw metrics and recorded series)."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _LABEL_LISTS.sub(" ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*", text):
        if text[match.end():].lstrip().startswith("(") or match.group().lower() in _KEYWORDS:
            continue  # a function or an aggregation, or a keyword
        names.add(match.group())
    return names


def selector_labels(expr: str) -> dict[str, set[str]]:
    """Label names each ``metric{...}`` selector of an expression matches on."""
    found: dict[str, set[str]] = {}
    for match in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}", expr):
        labels = {m.group(1) for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", match.group(2))}
        found.setdefault(match.group(1), set()).update(labels)
    return found


def comparison_lhs(expr: str) -> str:
    """The measured quantity of an alert: the expression left of its first top-level comparison."""
    depth, quote, i = 0, "", 0
    while i < len(expr):
        char = expr[i]
        if quote:
            if char == "\\":
                i += 2
                continue
            if char == quote:
                quote = ""
        elif char in "\"'`":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(("==", "!=", ">=", "<=", ">", "<"), i):
            return expr[:i].strip()
        i += 1
    raise ValueError(f"no top-level comparison in {expr!r}")


# --- Prometheus configuration -------------------------------------------------------------------------------
def pod_targets(pods: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Static target groups carrying the labels Kubernetes pod discovery gives a pod, so that the real
    relabel_configs run on them. Each pod: address (host:port of a declared container port), name, app (the
    label app.kubernetes.io/name), and optionally scrape / metrics_port / path (its prometheus.io annotations)."""
    groups = []
    for pod in pods:
        labels = {"__meta_kubernetes_namespace": pod.get("namespace", "rlgpt"),
                  "__meta_kubernetes_pod_name": pod["name"],
                  "__meta_kubernetes_pod_label_app_kubernetes_io_name": pod["app"],
                  "__meta_kubernetes_pod_phase": pod.get("phase", "Running")}
        annotations = {"scrape": pod.get("scrape"), "port": pod.get("metrics_port"), "path": pod.get("path")}
        for key, value in annotations.items():
            if value is not None:
                labels[f"__meta_kubernetes_pod_annotation_prometheus_io_{key}"] = str(value)
        groups.append({"targets": [pod["address"]], "labels": labels})
    return groups


def config_for_local(config: dict[str, Any], rule_file: Path, pods: list[dict[str, str]] | None,
                     interval: str | None = None) -> dict[str, Any]:
    """The in-cluster config with the rule file at its real path and, where ``pods`` is given, Kubernetes pod
    discovery replaced by static targets that carry the same ``__meta_kubernetes_*`` labels (the relabelling is
    kept as it is). Debian's Prometheus is built without Kubernetes discovery, and tests have no cluster."""
    config = json.loads(json.dumps(config))
    config["rule_files"] = [str(rule_file) if f == IN_CLUSTER_RULES else f for f in config["rule_files"]]
    if interval is not None:
        config["global"].update(scrape_interval=interval, scrape_timeout=interval, evaluation_interval=interval)
    if pods is not None:
        kept = []
        for job in config["scrape_configs"]:
            if job.pop("kubernetes_sd_configs", None) is not None:
                job["static_configs"] = pod_targets(pods)
                kept.append(job)
        config["scrape_configs"] = kept
    return config


def promtool_check_config(config: dict[str, Any], workdir: Path) -> subprocess.CompletedProcess[str]:
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return subprocess.run([require_tool("promtool"), "check", "config", str(path)], capture_output=True, text=True,
                          timeout=60)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Prometheus:
    """A real Prometheus on loopback and its HTTP API."""

    def __init__(self, url: str, log_path: Path):
        self.url = url
        self.log_path = log_path

    def api(self, path: str, **params: Any) -> Any:
        query = f"?{urllib.parse.urlencode(params, doseq=True)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=30) as reply:
                body = json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
            raise AssertionError(f"Prometheus refused {path} {params}: {body.get('error', exc)}") from None
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.api("query", query=expr)["result"]


@contextlib.contextmanager
def running_prometheus(config: dict[str, Any], workdir: Path, start_timeout: float = 60) -> Iterator[Prometheus]:
    """Starts ``prometheus`` with ``config`` on a free loopback port and stops it on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    log_path = workdir / "prometheus.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [require_tool("prometheus"), f"--config.file={config_path}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if process.poll() is not None:
                raise AssertionError(f"prometheus exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready in {start_timeout:.0f} s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield Prometheus(url, log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
