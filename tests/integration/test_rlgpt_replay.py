"""`rlgpt run --replay`: a run recorded against a scripted LLM (test double) is re-run with no LLM at all, its
calls answered from its own records by the replay server, its skills tested and evaluated live. The recorded run
is the one the session's shared remote planner (``cluster``) ran first, which test_rlgpt_run_remote reads too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rlgpt_run_support import options

from rlgpt.app.runner import run_rlgpt
from rlgpt.errors import FailedPrecondition, InvalidArgument, Unavailable

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def recorded(cluster) -> Path:
    """A finished run directory recorded against the scripted LLM: the shared remote planner's first run."""
    return cluster.first_run


def test_replay_re_runs_the_record_with_no_llm(recorded, tmp_path, monkeypatch) -> None:
    # No LLM anywhere: a call that escaped the replay would fail to connect.
    monkeypatch.setenv("RLGPT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RLGPT_CRITIC_LLM_ON_PASS", "true")  # as the recorded run's critic was configured
    report = run_rlgpt(options(tmp_path / "runs", task="ignored_by_a_replay", replay=recorded))
    run_dir = report.parent
    assert run_dir.name.startswith("collect_wood__")  # the recorded request, not the options
    summary = json.loads((run_dir / "replay.json").read_text())
    recorded_calls = sorted((recorded / "llm").glob("*.json"))
    assert summary["recorded_calls"] == summary["replayed_calls"] == len(recorded_calls) >= 3
    assert summary["same_prompt"] == len(recorded_calls) and summary["unused"] == {}
    state, before = (json.loads((d / "state.json").read_text()) for d in (run_dir, recorded))
    assert state["subtasks"]["get_wood"]["skill_code"] == before["subtasks"]["get_wood"]["skill_code"]
    assert state["final"]["success_rate"] == before["final"]["success_rate"] == 1.0
    # The replayed run keeps its own records, so it can be replayed in turn.
    assert [json.loads(p.read_text())["agent"] for p in sorted((run_dir / "llm").glob("*.json"))] == \
        [json.loads(p.read_text())["agent"] for p in recorded_calls]
    # Each run keeps the library it started with, and a replay starts from it: the prompts quote the library, so
    # a second replay into the same runs directory (whose library now holds get_wood) still meets every prompt.
    assert json.loads((recorded / "library_start.json").read_text()) == []
    again = run_rlgpt(options(tmp_path / "runs", replay=recorded)).parent
    assert json.loads((again / "replay.json").read_text())["same_prompt"] == len(recorded_calls)


def test_a_call_the_record_lacks_stops_the_run_with_its_name(recorded, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RLGPT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RLGPT_CRITIC_LLM_ON_PASS", "true")  # as the recorded run's critic was configured
    short = tmp_path / "short"
    shutil.copytree(recorded, short)
    for path in (short / "llm").glob("*-fast.json"):
        path.unlink()
    with pytest.raises(Unavailable, match=r"holds 0 'fast' call\(s\) and this run asks for call 1"):
        run_rlgpt(options(tmp_path / "runs", replay=short))


def test_replay_refuses_what_it_cannot_do(recorded, tmp_path) -> None:
    with pytest.raises(InvalidArgument, match="cannot be combined with --planner"):
        run_rlgpt(options(tmp_path / "runs", replay=recorded, planner="127.0.0.1:1"))
    with pytest.raises(FailedPrecondition, match="is not a run directory"):
        run_rlgpt(options(tmp_path / "runs", replay=tmp_path))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "request.json").write_text("{ nope")
    with pytest.raises(FailedPrecondition, match="cannot be read"):
        run_rlgpt(options(tmp_path / "runs", replay=tmp_path / "bad"))
