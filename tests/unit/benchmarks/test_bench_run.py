"""bench-run: a run read back from the files `rlgpt run` writes, and the section rebuilt from the raw results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from google.protobuf import json_format

from benchmarks.bench_run import CRITERIA, checked_work, main
from benchmarks.run.reading import read_run
from benchmarks.run.report import render_section, section_title
from rlgpt.llm.client import CallRecord, record_json
from rlgpt.v1 import common_pb2, critic_pb2, planner_pb2
from services.planner import task_review
from services.planner.state import FinalResult, IterationRecord, RunState

MACHINE = {"cpu_model": "Test CPU", "cpu_count": 2, "ram_gib": 7.8, "python": "3.12.3", "torch": "2.13.0",
           "sample_factory": "2.1.1", "crafter": "1.8.3"}
RUN_ID = "make_wood_pickaxe__20260101-000000__abcdef"


def worlds(solved: int, n: int = 32) -> list[bool]:
    return [i < solved for i in range(n)]


def fake_runs_dir(root: Path, per_iteration: list[int], final: int | None, stop_reason: str,
                  server_log: bool = True) -> Path:
    """A runs directory as `rlgpt run` leaves it: the run's request.json, state.json and llm/ records (written by
    the planner's own classes), and the embedded LLM server's log."""
    run_dir = root / RUN_ID
    (run_dir / "llm").mkdir(parents=True)
    request = planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="make_wood_pickaxe"), mode="rl-gpt",
                                          budgets=planner_pb2.Budgets(total_env_frames=40000))
    (run_dir / "request.json").write_text(json_format.MessageToJson(request))
    state = RunState(stop_reason=stop_reason, finished=True, frames_used=15000 * len(per_iteration))
    for i, solved in enumerate(per_iteration):
        verdict = critic_pb2.Verdict(target=critic_pb2.TARGET_FAST, subtask="place_table", diagnosis="stuck")
        record = IterationRecord(iteration=i, tokens=1000 + i, seconds=120.0, frames=15000,
                                 success_rate=solved / 32, episodes=32, successes=worlds(solved),
                                 kept="the first evaluated controller: kept" if i == 0 else "kept: better",
                                 verdict=task_review.verdict_json(verdict) if i < len(per_iteration) - 1 else {})
        state.iterations.append(record.as_json())
    if final is not None:
        state.final = FinalResult(episodes=32, frames_used=state.frames_used, controller="chain: a -> b",
                                  success_rate=final / 32, successes=worlds(final)).as_json()
    state.save(run_dir)
    for seq, agent in enumerate(("slow", "fast"), 1):
        call = CallRecord(seq=seq, agent=agent, iteration=0, model="local", messages=[], response="{}", parsed={},
                          prompt_tokens=100, completion_tokens=20 * seq, latency_seconds=1.0, attempts=1)
        (run_dir / "llm" / f"{seq:05d}-iter0-plan-{agent}.json").write_text(record_json(call))
    if server_log:
        (root / "logs").mkdir()
        (root / "logs" / "llm-server.log").write_text(
            "llama_model_loader: loaded meta data from /root/.cache/g/gemma-3-270m-q4_k_m.gguf (version GGUF V3)\n"
            "llama_model_loader: - kv   2:      general.name str              = Gemma 3 270m\n")
    return root


def test_a_run_is_read_from_its_own_files(tmp_path: Path) -> None:
    run = read_run(fake_runs_dir(tmp_path, [12, 20], 26, "its 2 outer iterations are spent, below its target"))
    assert run["run_id"] == RUN_ID and run["task"] == "make_wood_pickaxe"
    # The request's budget, the planner's defaults for the others.
    assert run["budgets"]["total_env_frames"] == 40000 and run["budgets"]["target_success"] == 0.8
    first, second = run["iterations"]
    assert first["evaluation"] == {"success_rate": 12 / 32, "successes": worlds(12), "count": 12, "episodes": 32}
    assert first["verdict"] == {"target": "TARGET_FAST", "subtask": "place_table", "diagnosis": "stuck"}
    assert first["kept"].startswith("the first") and second["verdict"] == {}
    assert (first["frames"], first["seconds"], first["tokens"]) == (15000, 120.0, 1000)
    assert run["final"]["count"] == 26 and run["final"]["successes"] == worlds(26)
    assert run["final"]["controller"] == "chain: a -> b" and run["frames_used"] == 30000
    assert run["outer_iterations"] == 2 and run["stop_reason"].startswith("its 2 outer")
    assert (run["tokens"], run["llm_calls"]) == (100 + 20 + 100 + 40, 2)
    assert run["llm"] == "embedded Gemma 3 270m (gemma-3-270m-q4_k_m.gguf, llama.cpp server)"


def test_the_llm_falls_back_to_the_settings_and_a_missing_run_reads_as_none(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLGPT_LLM_LOCAL_MODEL", "smollm2")
    run = read_run(fake_runs_dir(tmp_path / "a", [12], None, "", server_log=False))
    assert run["llm"] == "embedded smollm2 (llama.cpp server)" and run["final"] is None
    assert read_run(tmp_path / "empty") == {"run_id": ""}


def results_of(tmp_path: Path) -> dict[str, Any]:
    """Raw results of three seeds: one reached its target, one spent its frames below it, one timed out."""
    runs = []
    for seed, (per_iteration, final, stop, minutes, timed_out) in enumerate([
            ([20, 28], 28, "the whole task reached its target: 88% (28/32)", 12.0, False),
            ([12, 20], 20, "its frame budget is spent (40000 of 40000 frames)", 16.0, False),
            ([4], None, "", 30.5, True)]):
        run = read_run(fake_runs_dir(tmp_path / f"seed{seed}", per_iteration, final, stop))
        runs.append({"seed": seed, "returncode": -9 if timed_out else 0, "timed_out": timed_out,
                     "timeout_seconds": 1800.0, "wall_seconds": 60 * minutes,
                     **({"log_tail": ["training..."]} if timed_out else {}), **run})
    return {"date_utc": "2026-01-01 00:00 UTC", "machine": MACHINE, "seeds": [0, 1, 2], "extra": "",
            "command": ".venv/bin/rlgpt run --seed S --runs-dir runs/bench-run/x/seedS", "timeout_minutes": 30,
            "criteria": CRITERIA, "raw": "docs/results/make-run.json", "runs": runs}


def test_the_section_says_the_median_the_intervals_and_why_each_run_stopped(tmp_path: Path) -> None:
    results = results_of(tmp_path)
    text = render_section(results, "figures/make_run.png", section_title(results))
    assert text.startswith("## make run on 3 seeds (make bench-run)\n")
    assert "Measured 2026-01-01 00:00 UTC on Test CPU, 2 cores" in text and "LLM: embedded Gemma 3 270m" in text
    assert "3 seeds of one clone" in text and "not 3 fresh clones" in text
    assert "| 0 | 2 | 30,000 | 88% (28/32, 95% CI 72-95%) | 12.0 | yes | the whole task reached its target" in text
    assert "| 1 | 2 | 30,000 | 62% (20/32, 95% CI 45-77%) | 16.0 | no | its frame budget is spent" in text
    assert "| 2 | 1 | 15,000 | not evaluated | 30.5 | no | timed out: the bench stopped it after 30 min |" in text
    # The median of 88%, 62% and 0% (no final evaluation) against the bar.
    assert "**Median final success across the 3 seeds: 62%** (the bar: 75%, not met)" in text
    assert "1 of 3 runs took at most 15 minutes" in text and "Seed 2 ended without a final evaluation" in text
    assert "Seed 1's final evaluation (" in text and "because its frame budget is spent" in text
    assert "Seed 0 stopped below" not in text
    assert "budgets (the planner's defaults but total_env_frames, set by the command line): target 80% whole-task " \
           "success, 40,000 env frames, 4 outer iterations, 32 episodes" in text
    assert "| 1 | 0 | 38% (12/32, 95% CI 23-55%) | 15,000 | 2.0 | 1,000 | the first evaluated controller: kept | " \
           "the fast agent (place_table) |" in text
    assert "![make run, whole-task success per iteration and final](figures/make_run.png)" in text


def test_report_only_rebuilds_the_section_and_figure_from_the_raw_file(tmp_path: Path, invoke) -> None:
    raw, output, figure = tmp_path / "make-run.json", tmp_path / "docs" / "B.md", tmp_path / "docs" / "f" / "r.png"
    results = results_of(tmp_path / "runs")
    raw.write_text(json.dumps(results))
    output.parent.mkdir()
    output.write_text("# Benchmarks\n\n## Another section\n\nkept\n")
    args = ("--report-only", "--raw-json", str(raw), "--output", str(output), "--figure", str(figure))
    assert invoke(main, *args)[0] == 0
    first = output.read_text()
    assert invoke(main, *args)[0] == 0
    assert output.read_text() == first and first.count("## make run on 3 seeds") == 1
    assert "## Another section\n\nkept" in first and figure.stat().st_size > 0
    assert render_section(results, "f/r.png", section_title(results)) in first


def test_report_only_without_raw_results_and_bad_options_are_usage_errors(tmp_path: Path, invoke) -> None:
    code, output = invoke(main, "--report-only", "--raw-json", str(tmp_path / "none.json"), "--output",
                          str(tmp_path / "B.md"))
    assert code == 2 and "run without --report-only first" in output
    code, output = invoke(main, "--extra", "--seed 3", "--work", str(tmp_path / "w"))
    assert code == 2 and "--seed" in output and not (tmp_path / "w").exists()
    code, output = invoke(main, "--seeds", "0,0")
    assert code == 2 and "distinct seeds" in output


def test_a_seed_directory_with_an_unfinished_run_is_refused(tmp_path: Path) -> None:
    fake_runs_dir(tmp_path / "seed1", [4], None, "")
    checked_work(tmp_path, [0])  # seed 0 has no directory yet: fine
    with pytest.raises(typer.BadParameter, match="unfinished run"):
        checked_work(tmp_path, [0, 1])
