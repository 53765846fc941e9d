"""Monitoring end to end: the four services as real processes on loopback, real activity through their gRPC APIs,
and a real Prometheus that scrapes them through the in-cluster relabelling (prometheus.yml, with pod discovery
replaced by static targets carrying the same pod labels) and loads the real rules.yml. Every dashboard query, every
recording rule and the measured side of every alert must return data; alert firing logic is proven by
`promtool test rules` (tests/deploy/test_monitoring_config.py). The LLM is a hosted outside service: the planner
and the critic talk to the OpenAI-compatible test double (tests/fakes/fake_openai.py)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import grpc
import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply
from monitoring_support import (
    PROMETHEUS_CONFIG,
    RULES,
    SCRAPE_JOB,
    Prometheus,
    comparison_lhs,
    config_for_local,
    dashboard_targets,
    load_dashboard,
    load_yaml,
    require_tool,
    rules,
    running_prometheus,
    substitute,
)

from rlgpt.app.runner import RunOptions, local_services
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, learner_pb2_grpc, planner_pb2, planner_pb2_grpc
from services.env_server.skills.reference import COLLECT_WOOD

pytestmark = pytest.mark.timeout(420)
# $__rate_interval and $__range: long enough to hold the whole test, so that sparse events (LLM calls, verdicts,
# the outer iteration) are still inside the window when the queries run.
WINDOW = "5m"
FAILING_TASK = "place stone (the LLM fails on this one)"  # the LLM double answers HTTP 500 to prompts with it
PLAN = {"rationale": "wood is one coded step", "subtasks": [
    {"name": "get_wood", "description": "collect wood", "success": [{"achievement": "collect_wood"}],
     "decision": "code", "skills": []}]}
VERDICT = {"success": True, "diagnosis": "scripted critic", "suggestion": "none", "target": "fast"}
# Fails only when started holding 9 wood: RegisterSkill's test worlds start empty, so it is accepted.
FAILS_AFTER_THREE = ("def skill(agent):\n    yield 'noop'\n    yield 'noop'\n    yield 'noop'\n"
                     "    if agent.inventory['wood'] >= 9:\n        raise ValueError('gave up')\n")
# Panels whose value may legitimately be 0 in a short run (every other panel must show a positive sample).
MAY_BE_ZERO = {"Success rate per job", "Mean return per job", "Planner runs active"}


def scripted_llm(body: dict) -> Reply:
    if FAILING_TASK in json.dumps(body["messages"]):
        return Reply(status=500)
    name = body["response_format"]["json_schema"]["name"]
    return Reply.json({"Plan": PLAN, "SkillAnswer": {"name": "get_wood", "description": "chop", "code": COLLECT_WOOD},
                       "CriticAnswer": VERDICT}[name])


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def values(result: list[dict]) -> list[float]:
    return [float(series["value"][1]) for series in result]


# --- activity ------------------------------------------------------------------------------------------------
def drive_env_server(target: str) -> None:
    """Steps in an open session, a refused skill (INVALID_ARGUMENT), a skill that raises at run time."""
    stub = env_pb2_grpc.EnvServiceStub(create_channel(target, default_timeout=60, wait_ready_seconds=10))
    session = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2, seed=1))  # left open: sessions_active 1
    for _ in range(20):
        stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=[1, 2]))
    with pytest.raises(grpc.RpcError) as refused:
        stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="imports", code="import os\n\ndef skill(agent):\n"
                                                                               "    yield 'noop'\n"))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="fails_after_three", code=FAILS_AFTER_THREE, replace=True))
    result = stub.RunSkill(env_pb2.RunSkillRequest(skill="fails_after_three", episodes=1, max_steps=20,
                                                   task=common_pb2.TaskSpec(start_inventory=[
                                                       common_pb2.ItemCount(item="wood", count=9)])))
    assert result.episodes[0].error.type == "ValueError"


def start_training(target: str) -> tuple[learner_pb2_grpc.LearnerServiceStub, str]:
    """A small APPO job with a budget it will not reach: it still runs while Prometheus is queried."""
    stub = learner_pb2_grpc.LearnerServiceStub(create_channel(target, default_timeout=120, wait_ready_seconds=10))
    config = learner_pb2.RLConfig(
        name="monitoring", task=common_pb2.TaskSpec(name="collect_wood"), env_frames=1_000_000, num_workers=1,
        envs_per_worker=2, episode_length=100, seed=1, skill_max_steps=1,
        reward_terms=[common_pb2.RewardTerm(kind="success", weight=1.0)])
    return stub, stub.StartTraining(learner_pb2.StartTrainingRequest(config=config)).job_id


def training_progress(stub: learner_pb2_grpc.LearnerServiceStub, job_id: str) -> learner_pb2.JobProgress:
    jobs = stub.ListJobs(learner_pb2.ListJobsRequest()).jobs
    return next(j for j in jobs if j.job_id == job_id).progress


def planner_stub(target: str) -> planner_pb2_grpc.PlannerServiceStub:
    return planner_pb2_grpc.PlannerServiceStub(create_channel(target, default_timeout=60, wait_ready_seconds=10))


def run_planner(stub: planner_pb2_grpc.PlannerServiceStub) -> None:
    """A code-only run: slow + fast agent, a skill test on the env server, a critic verdict, one outer iteration."""
    run = stub.StartRun(planner_pb2.StartRunRequest(
        task=common_pb2.TaskSpec(name="collect_wood"), seed=2,
        budgets=planner_pb2.Budgets(max_outer_iterations=1, max_inner_iterations=1, eval_episodes=1)))
    events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=240))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[-1] == "run_end" and "verdict" in kinds and "iteration_end" in kinds, kinds


def run_planner_with_failing_llm(stub: planner_pb2_grpc.PlannerServiceStub) -> None:
    """A run whose first LLM call fails (an LLM error); the run ends with an error event."""
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="place_stone",
                                                                             description=FAILING_TASK)))
    events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=120))
    assert events[-1].WhichOneof("payload") == "error", events[-1]


# --- checks against Prometheus ---------------------------------------------------------------------------------
def missing_data(prometheus: Prometheus) -> list[str]:
    """Every dashboard query, recorded series and alert quantity that has no data (yet)."""
    problems = []
    by_panel: dict[str, list[float]] = {}
    for panel, target in dashboard_targets(load_dashboard()):
        expr = substitute(target["expr"], WINDOW)
        found = values(prometheus.query(expr))
        by_panel.setdefault(panel["title"], []).extend(found)
        if not any(math.isfinite(v) for v in found):
            problems.append(f"panel {panel['title']!r} query {target['refId']}: {expr} -> {found}")
    for title, found in by_panel.items():
        if title not in MAY_BE_ZERO and not any(v > 0 for v in found if math.isfinite(v)):
            problems.append(f"panel {title!r}: no positive sample ({found})")
    for rule in rules():
        if "record" in rule:
            found = values(prometheus.query(rule["record"]))
            if not any(math.isfinite(v) for v in found):
                problems.append(f"recorded series {rule['record']}: {found}")
        else:
            lhs = comparison_lhs(rule["expr"])
            if not prometheus.query(lhs):
                problems.append(f"alert {rule['alert']}: its measured quantity has no data: {lhs}")
    return problems


def test_dashboard_rules_and_alerts_have_data_from_the_running_services(tmp_path: Path, monkeypatch) -> None:
    require_tool("prometheus")
    with FakeOpenAIServer([scripted_llm]) as llm:
        for name, value in {"RLGPT_LLM_BASE_URL": llm.base_url, "RLGPT_LLM_MODEL": "scripted",
                            "RLGPT_LLM_MAX_RETRIES": "0", "RLGPT_LLM_TIMEOUT_SECONDS": "30",
                            "RLGPT_PLANNER_TEST_EPISODES": "1", "RLGPT_PLANNER_TEST_STEPS": "150",
                            "RLGPT_LEARNER_PROGRESS_INTERVAL_SECONDS": "1"}.items():
            monkeypatch.setenv(name, value)
        options = RunOptions(task="collect_wood", success="", mode="rl-gpt", agents="slow-fast-critic", resume=None,
                             runs_dir=tmp_path / "runs", outer=1, inner=1, frames_per_training=1000, total_frames=0,
                             eval_episodes=1, candidates=1, seed=0)
        options.runs_dir.mkdir(parents=True)
        with local_services(options, tmp_path / "logs") as services:
            # The pods as Kubernetes discovery would list them: gRPC port declared, metrics port annotated.
            pods = [{"address": s.target, "name": f"{key}-0", "app": s.name, "scrape": "true",
                     "metrics_port": s.metrics_port, "path": "/metrics"} for key, s in services.items()]
            pods.append({"address": f"127.0.0.1:{llm.port}", "name": "not-annotated", "app": "other"})
            config = config_for_local(load_yaml(PROMETHEUS_CONFIG), RULES, pods, interval="1s")
            with running_prometheus(config, tmp_path / "prometheus") as prometheus:
                learner, job_id = start_training(services["learner"].target)

                # Activity starts once every service has been scraped: rate() and increase() only see what
                # changes after a series' first sample.
                def targets_up() -> bool:
                    active = prometheus.api("targets", state="active")["activeTargets"]
                    return len(active) == len(services) and all(t["health"] == "up" for t in active)

                wait_for(targets_up, 60, "a healthy scrape target per service process")
                planner = planner_stub(services["planner"].target)
                # Errors carry labels (kind, code) that only exist once they happen: a first round creates the
                # series, a second after they were scraped makes them move.
                drive_env_server(services["env"].target)
                run_planner_with_failing_llm(planner)
                for series in ("rlgpt_env_skill_errors_total", 'rlgpt_grpc_requests_total{code!="OK"}',
                               "rlgpt_planner_llm_errors_total"):
                    wait_for(lambda series=series: prometheus.query(series), 30, f"{series} scraped")
                drive_env_server(services["env"].target)
                run_planner_with_failing_llm(planner)
                run_planner(planner)
                wait_for(lambda: training_progress(learner, job_id).env_frames > 0, 180, "training progress")
                targets = prometheus.api("targets")
                labels = sorted((t["labels"]["service"], t["labels"]["pod"], t["labels"]["namespace"],
                                 t["labels"]["instance"], t["labels"]["job"]) for t in targets["activeTargets"])
                assert labels == sorted((s.name, f"{key}-0", "rlgpt", f"127.0.0.1:{s.metrics_port}", SCRAPE_JOB)
                                        for key, s in services.items())
                dropped = [t["discoveredLabels"]["__meta_kubernetes_pod_name"] for t in targets["droppedTargets"]]
                assert dropped == ["not-annotated"]

                # Rules loaded and evaluating; alert expressions parse and run.
                loaded = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
                assert len(loaded) == len(rules()) and all(r["health"] == "ok" for r in loaded), loaded
                for rule in rules():
                    if "alert" in rule:
                        prometheus.query(rule["expr"])

                deadline = time.monotonic() + 90
                while (problems := missing_data(prometheus)) and time.monotonic() < deadline:
                    time.sleep(1)
                assert not problems, "no data:\n" + "\n".join(problems)

                # The job variable lists the running job; no scraped label was renamed by a clash with a target label.
                jobs = prometheus.api("label/job_id/values", **{"match[]": "rlgpt_learner_env_frames_total"})
                assert job_id in jobs
                names = prometheus.api("labels", **{"match[]": '{__name__=~"rlgpt_.+"}'})
                assert not [n for n in names if n.startswith("exported_")], names
