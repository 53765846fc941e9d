"""bench-rlgpt starts every run from an empty skill library of its own and records it; the section marks runs that
shared one library (results saved before) apart from runs with their own."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_rlgpt
from benchmarks.rlgpt.library import (
    LIBRARY_ENV,
    NOT_RECORDED,
    SNAPSHOT,
    library_cell,
    library_text,
    run_library,
    started_with,
)
from benchmarks.rlgpt.report import render_section


def test_every_run_gets_services_of_its_own_with_an_empty_library_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LIBRARY_ENV, str(tmp_path / "elsewhere.json"))  # the bench's own file wins over this
    stale = run_library(tmp_path, 1, "collect_stone", "pure-code", "slow-fast-critic")
    stale.write_text(json.dumps([{"name": "from_an_earlier_bench"}]))
    started: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def services(_options: Any, log_dir: Path, service_env: dict[str, str]) -> Iterator[dict[str, Any]]:
        library = Path(service_env[LIBRARY_ENV])
        started.append({"library": library, "empty": not library.exists(), "logs": log_dir})
        yield {"library": library}

    def run_one(services: dict[str, Any], task: str, mode: str, setup: str, _options: Any,
                _name: str) -> tuple[dict[str, Any], Path | None]:
        # As the planner does: snapshot the library at the run's start, then store a skill that passed its tests.
        library, run_dir = services["library"], tmp_path / f"{task}-{mode}"
        run_dir.mkdir()
        (run_dir / SNAPSHOT).write_text(library.read_text() if library.exists() else "[]")
        library.write_text(json.dumps([{"name": f"{task}_skill"}]))
        return {"success_rate": 1.0}, None if mode == bench_rlgpt.REFERENCE_MODE else run_dir

    monkeypatch.setattr(bench_rlgpt, "local_services", services)
    monkeypatch.setattr(bench_rlgpt, "run_one", run_one)
    results = bench_rlgpt.run_modes(["collect_stone", "make_wood_pickaxe"], ["pure-code", "rl-gpt"],
                                    ["slow-fast-critic"], 1000, 2, tmp_path, llm_name="scripted")

    libraries = [s["library"] for s in started]
    assert len(started) == len(results["runs"]) == 4
    assert len(set(libraries)) == 4 and all(s["empty"] for s in started)
    assert len({s["logs"] for s in started}) == 4
    assert all(path.parent == tmp_path / "libraries" for path in libraries)
    assert [r["library"] for r in results["runs"]] == [
        {"file": str(path.relative_to(tmp_path)), "shared": False, "skills": []} for path in libraries]
    assert libraries[0] == stale


def test_a_run_without_a_planner_run_records_the_file_it_was_given(tmp_path: Path) -> None:
    library = run_library(tmp_path, 3, "collect_stone", "rl+reference-skills", "")
    assert library.name == "03-collect_stone-rl+reference-skills.json"
    assert started_with(tmp_path, library, None) == {
        "file": "libraries/03-collect_stone-rl+reference-skills.json", "shared": False, "skills": []}


def run(task: str, mode: str, library: dict[str, Any] | None) -> dict[str, Any]:
    return {"task": task, "mode": mode, "agents": "slow-fast-critic" if mode != "pure-rl" else "",
            "success_rate": 0.5, "frames_to_first_training_success": None, "training_frames": 0, "tokens": 10,
            "error": "", "plan": "", **({"library": library} if library is not None else {})}


SHARED = [run("collect_stone", "pure-rl", {"file": "skill_library.json", "shared": True, "skills": []}),
          run("collect_stone", "pure-code", {"file": "skill_library.json", "shared": True,
                                             "skills": ["get_3_wood", "place_table"]})]


def test_the_cell_says_whose_library_and_what_it_held() -> None:
    assert [library_cell(r) for r in SHARED] == ["shared, empty", "shared: get_3_wood, place_table"]
    assert library_cell(run("collect_stone", "rl-gpt", {"file": "libraries/03.json", "shared": False,
                                                        "skills": []})) == "own, empty"
    assert library_cell(run("collect_stone", "rl-gpt", None)) == NOT_RECORDED


def test_shared_runs_are_said_not_to_compare_from_one_library_state() -> None:
    text = library_text(SHARED)
    assert "do not compare from the same library state" in text
    assert "`collect_stone` / `pure-code` started with skills of earlier runs" in text
    assert "had a library of its own" not in text
    unrecorded = library_text([run("collect_stone", "pure-rl", None)])
    assert "Runs marked `shared`" in unrecorded and "started with skills" not in unrecorded


def test_runs_with_their_own_library_are_said_to_start_empty_and_mixed_results_say_both() -> None:
    own = [run("collect_stone", m, {"file": f"libraries/0{i}.json", "shared": False, "skills": []})
           for i, m in enumerate(("pure-rl", "pure-code"), 1)]
    text = library_text(own)
    assert "Each run had a library of its own" in text and "shared" not in text
    mixed = library_text([*SHARED, own[0]])
    assert "Each run marked `own` had a library of its own" in mixed and "Runs marked `shared`" in mixed


def test_the_section_has_a_library_column() -> None:
    results = {"settings": {"frames": 1000, "eval_episodes": 2, "outer": 2, "inner": 2}, "reference_skills": [],
               "runs": SHARED, "total_seconds": 60}
    section = render_section(results)
    assert "| min | library at start | measured |" in section
    assert "| shared: get_3_wood, place_table |" in section
