"""The monitoring files under deploy/k8s/monitoring, checked with promtool and against rlgpt/metrics.py.

Fast checks (no service runs): the scrape config and the rules are valid for Prometheus, the rules' unit tests
(rules_test.yml) pass, every alert is proven to fire and to stay silent, and every metric the dashboard and the
rules name exists. tests/integration/test_monitoring.py runs all of it against a real Prometheus.
"""

from __future__ import annotations

import subprocess

import pytest
from monitoring_support import (
    IN_CLUSTER_RULES,
    PROMETHEUS_CONFIG,
    RULES,
    RULES_TEST,
    SCRAPE_JOB,
    comparison_lhs,
    config_for_local,
    dashboard_targets,
    load_dashboard,
    load_yaml,
    metric_names,
    promtool_check_config,
    require_tool,
    rules,
    selector_labels,
)
from prometheus_client.metrics import MetricWrapperBase

from rlgpt import metrics

# Labels Prometheus attaches to every scraped series (prometheus.yml); a metric with a label of the same name
# would have it renamed to exported_<name>.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service"}
SEVERITIES = {"warning", "critical"}


def rlgpt_metrics() -> dict[str, MetricWrapperBase]:
    return {name: value for name, value in vars(metrics).items() if isinstance(value, MetricWrapperBase)}


def exposed_series() -> dict[str, set[str]]:
    """Series name -> label names, for every metric of rlgpt/metrics.py as /metrics exposes it."""
    exposed: dict[str, set[str]] = {}
    for metric in rlgpt_metrics().values():
        family = metric.describe()[0]
        labels = set(metric._labelnames)
        suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count"),
                    "summary": ("", "_sum", "_count")}[family.type]
        for suffix in suffixes:
            exposed[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return exposed


def recorded_series() -> set[str]:
    return {rule["record"] for rule in rules() if "record" in rule}


def all_queries() -> list[tuple[str, str]]:
    """(where, expr) for every rule, every panel query and every template variable query."""
    queries = [(rule.get("record") or rule["alert"], rule["expr"]) for rule in rules()]
    dashboard = load_dashboard()
    queries += [(f"panel {panel['title']!r}", target["expr"]) for panel, target in dashboard_targets(dashboard)]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            metric = variable["definition"].removeprefix("label_values(").split(",")[0].strip()
            queries.append((f"variable {variable['name']}", metric))
    return queries


# --- Prometheus config -------------------------------------------------------------------------------------
def test_scrape_config_discovers_the_annotated_pods_of_namespace_rlgpt() -> None:
    config = load_yaml(PROMETHEUS_CONFIG)
    assert config["rule_files"] == [IN_CLUSTER_RULES]
    job = next(j for j in config["scrape_configs"] if j["job_name"] == SCRAPE_JOB)
    assert job["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["rlgpt"]}}]
    relabel = job["relabel_configs"]
    keep = [r for r in relabel if r.get("action") == "keep"]
    assert keep == [{"source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"], "action": "keep",
                     "regex": "true"}]
    targets = {r.get("target_label"): r["source_labels"] for r in relabel if r.get("target_label")}
    assert targets["namespace"] == ["__meta_kubernetes_namespace"]
    assert targets["pod"] == ["__meta_kubernetes_pod_name"]
    assert targets["service"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_name"]
    assert targets["__metrics_path__"] == ["__meta_kubernetes_pod_annotation_prometheus_io_path"]
    assert targets["__address__"] == ["__address__", "__meta_kubernetes_pod_annotation_prometheus_io_port"]


def test_promtool_accepts_the_scrape_config(tmp_path) -> None:
    config = load_yaml(PROMETHEUS_CONFIG)
    result = promtool_check_config(config_for_local(config, RULES, pods=None), tmp_path)
    if "kubernetes_sd_configs not found" in result.stdout + result.stderr:
        # Debian's Prometheus is built without Kubernetes discovery: check everything else (global, rule files,
        # relabelling) with the discovery replaced by static targets that carry a pod's discovery labels.
        pod = {"address": "10.0.0.5:50051", "name": "env-0", "app": "env", "scrape": "true", "metrics_port": 9100}
        result = promtool_check_config(config_for_local(config, RULES, pods=[pod]), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and "rules found" in result.stdout


# --- rules ---------------------------------------------------------------------------------------------------
def test_promtool_accepts_the_rules() -> None:
    result = subprocess.run([require_tool("promtool"), "check", "rules", str(RULES)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_unit_tests_pass() -> None:
    result = subprocess.run([require_tool("promtool"), "test", "rules", RULES_TEST.name], capture_output=True,
                            text=True, timeout=120, cwd=RULES_TEST.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_tested_firing_and_silent() -> None:
    cases: dict[str, list[list]] = {}
    for test in load_yaml(RULES_TEST)["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], []).append(case.get("exp_alerts") or [])
    for rule in rules():
        if "alert" not in rule:
            continue
        name = rule["alert"]
        assert any(cases.get(name, [])), f"{name}: no test case in which it fires"
        assert any(not alerts for alerts in cases[name]), f"{name}: no test case in which it stays silent"


def test_alerts_have_for_severity_summary_and_description() -> None:
    alerts = [rule for rule in rules() if "alert" in rule]
    assert {"RlgptTrainingStalled", "RlgptEnvServerErrors", "RlgptSkillWorkerRestarts",
            "RlgptLLMErrorRateHigh"} <= {a["alert"] for a in alerts}
    for alert in alerts:
        assert alert.get("for"), f"{alert['alert']}: no for:"
        assert alert["labels"]["severity"] in SEVERITIES, alert["alert"]
        assert alert["annotations"]["summary"].strip() and alert["annotations"]["description"].strip()
        comparison_lhs(alert["expr"])  # every alert compares a measured quantity (checked live by the integration test)


def test_recorded_series_follow_the_naming_convention() -> None:
    for name in recorded_series():
        level, _, rest = name.partition(":")
        assert level == "rlgpt" and rest.count(":") == 1, f"{name}: expected rlgpt:<metric>:<operation>"


# --- dashboard -----------------------------------------------------------------------------------------------
def test_dashboard_is_a_grafana_dashboard_with_its_variables() -> None:
    dashboard = load_dashboard()
    assert 36 <= dashboard["schemaVersion"] <= 41 and dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    job = variables["job"]
    assert job["type"] == "query" and job["datasource"]["uid"] == "${datasource}"
    assert job["definition"].startswith("label_values(rlgpt_learner_") and job["definition"].endswith(", job_id)")
    assert job["includeAll"] and job["allValue"] == ".*"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_every_panel_queries_prometheus() -> None:
    dashboard = load_dashboard()
    assert len(dashboard["panels"]) >= 14
    for panel in dashboard["panels"]:
        assert panel["type"] != "row", "rows have no queries; keep the dashboard flat"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}, panel["title"]
        assert panel["targets"], f"panel {panel['title']!r} has no queries"
        for target in panel["targets"]:
            assert target["expr"].strip(), f"panel {panel['title']!r} target {target['refId']} has no expr"
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
    titles = " | ".join(p["title"] for p in dashboard["panels"])
    for wanted in ("Training FPS per job", "Success rate per job", "Mean return per job", "Env frames per job",
                   "Env steps/s", "Env sessions", "Skill runs", "Skill errors by kind", "gRPC errors by service",
                   "LLM tokens/s by agent and kind", "LLM call latency p50/p95", "LLM errors",
                   "Critic verdicts by outcome", "Outer iterations", "Planner runs active"):
        assert wanted in titles, f"no panel {wanted!r}"


def test_learner_panels_follow_the_job_variable() -> None:
    for panel, target in dashboard_targets(load_dashboard()):
        if "rlgpt_learner_" in target["expr"] and "per job" in panel["title"]:
            assert 'job_id=~"$job"' in target["expr"], panel["title"]


# --- metric names ----------------------------------------------------------------------------------------------
def test_every_metric_named_in_rules_and_dashboard_exists() -> None:
    known = set(exposed_series()) | recorded_series() | {"up"}
    for where, expr in all_queries():
        names = metric_names(expr)
        assert names, f"{where}: no metric found in {expr!r}"
        unknown = names - known
        assert not unknown, f"{where}: {sorted(unknown)} are neither in rlgpt/metrics.py nor recorded in rules.yml"


def test_selectors_match_on_labels_the_metrics_have() -> None:
    exposed = exposed_series()
    for where, expr in all_queries():
        for name, labels in selector_labels(expr).items():
            if name in exposed:
                unknown = labels - exposed[name] - TARGET_LABELS
                assert not unknown, f"{where}: {name} has no label {sorted(unknown)}"


def test_no_metric_label_clashes_with_a_target_label() -> None:
    for name, metric in rlgpt_metrics().items():
        clash = set(metric._labelnames) & TARGET_LABELS
        assert not clash, f"{name}: label {sorted(clash)} would be renamed exported_* by Prometheus"


@pytest.mark.parametrize(("expr", "names"), [
    ('sum by (namespace, le) (rate(rlgpt_x_bucket{code!="OK", job_id=~"$job"}[$__rate_interval]))', {"rlgpt_x_bucket"}),
    ("max by (a) (changes(m1[5m])) == 0 and on (a) max by (a) (m2) == 1", {"m1", "m2"}),
    ("(sum(rate(a[5m])) or sum(rate(b[5m])) * 0) / sum(rate(b[5m])) > 0.05", {"a", "b"}),
    ("rlgpt:env_steps:rate1m", {"rlgpt:env_steps:rate1m"}),
])
def test_metric_name_reader(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_comparison_lhs_reader() -> None:
    assert comparison_lhs('max by (a) (changes(m{x!="y"}[5m])) == 0 and on (a) m2 == 1') == \
        'max by (a) (changes(m{x!="y"}[5m]))'
    assert comparison_lhs("(a or b * 0) / b > 0.05") == "(a or b * 0) / b"
