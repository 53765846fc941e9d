"""`rlgpt run --planner HOST:PORT`: the four real services on loopback, started apart from the client with their
runs in a directory the client never reads (as on a cluster); a scripted LLM (test double). The client gets the
report and its plots over gRPC, and `--resume RUN_ID` continues a paused run through the planner. The services
and their first run are the session's ``cluster`` (tests/integration/conftest.py), which test_rlgpt_replay
replays and test_rlgpt_run asks for refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from rlgpt_run_support import options

from rlgpt.app.runner import run_rlgpt
from rlgpt.errors import InvalidArgument, Unavailable

pytestmark = pytest.mark.timeout(600)
REPORT_FILES = {"report.md", "curves.png", "iterations.png"}


def test_the_report_comes_over_grpc_into_the_clients_runs_dir(cluster) -> None:
    report, planner_runs = cluster.first_report, cluster.planner_runs  # the run the fixture asked of the planner
    run_id = report.parent.name
    assert report == cluster.client.resolve() / run_id / "report.md"
    # The report only (its plots and the final controller's animations): the state stays on the planner.
    files = {str(p.relative_to(report.parent)) for p in report.parent.rglob("*") if p.is_file()}
    assert files >= REPORT_FILES and all(name.startswith("animations/") and name.endswith(".gif")
                                         for name in files - REPORT_FILES)
    assert (planner_runs / run_id / "state.json").exists()
    text = report.read_text()
    assert "- outcome: finished" in text and "| get_wood | code | done | 100% |" in text
    for name in files:
        assert (report.parent / name).read_bytes() == (planner_runs / run_id / name).read_bytes()


def test_resume_by_run_id_through_the_planner(cluster, tmp_path) -> None:
    target, planner_runs, script = cluster.target, cluster.planner_runs, cluster.script
    client = tmp_path / "client"
    plans = script.plans
    script.failing = True  # the LLM fails after the plan: the run pauses, resumable
    try:
        with pytest.raises(Unavailable, match=r"Resume with: rlgpt run --resume (\S+) --planner ") as info:
            run_rlgpt(options(client, planner=target))
    finally:
        script.failing = False
    run_id = info.value.args[0].split("--resume ")[1].split()[0]
    partial = client.resolve() / run_id / "report.md"
    assert f"partial report {partial}" in str(info.value)
    assert "- outcome: failed: " in partial.read_text()
    # The client gives the id (a path to the local copy works too: its last part is the id).
    report = run_rlgpt(options(client, planner=target, resume=client / run_id))
    assert report == partial and "- outcome: finished" in report.read_text()
    assert script.plans == plans + 1  # the plan of before the pause was kept
    assert (planner_runs / run_id / "state.json").exists() and not (client / run_id / "state.json").exists()


def test_resume_of_a_run_the_planner_does_not_know(cluster, tmp_path) -> None:
    target = cluster.target
    with pytest.raises(InvalidArgument, match=r"NOT_FOUND: no run 'collect_wood__nope' on this planner"):
        run_rlgpt(options(tmp_path, planner=target, resume=Path("collect_wood__nope")))
