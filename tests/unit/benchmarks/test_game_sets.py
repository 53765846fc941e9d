"""bench-game's held-out sets: declared apart from every world the run played, scored once (a second scoring of
the same run and worlds refuses, with the next set to declare), an interrupted declaration scored under itself."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.game import raw
from benchmarks.game.cli import main
from benchmarks.game.controller import CODE_PLAN, FinalController
from benchmarks.game.scoring import score
from benchmarks.game.sets import SetRefused, WorldRange, check_new_set, declared_set, run_world_ranges
from rlgpt import worlds
from services.planner.state import RunState, SubTaskState

RUN = Path(__file__).resolve().parents[3] / "docs" / "runs" / "claude-relay-make_wood_pickaxe"


def saved(root: Path, run_id: str, *sets: tuple[int, str], episodes: int = 4) -> Path:
    scorings = [{"set": k, "first_seed": worlds.game_bench_worlds(0, k), "episodes_declared": episodes,
                 "declared_utc": "2026-11-28 10:00 UTC", "status": status, "scored_utc": "2026-11-28 10:05 UTC",
                 "achievements": ["collect_wood"], "episodes": []} for k, status in sets]
    path = raw.raw_file(root, "earlier")
    raw.save(path, {"bench": "bench-game", "name": "earlier", "run": {"id": run_id}, "controller": {},
                    "scorings": scorings})
    return path


def test_each_set_is_apart_from_the_runs_evaluations_and_from_the_other_sets() -> None:
    used = run_world_ranges(0, RunState(), Path("no-jobs"))
    sets = [declared_set(0, k, worlds.GAME_BENCH_SET) for k in range(3)]
    assert not any(s.overlaps(r) for s in sets for r in used)
    assert not any(a.overlaps(b) for a in sets for b in sets if a is not b)
    with pytest.raises(ValueError, match=r"holds 1\.\.10,000 worlds"):
        declared_set(0, 0, worlds.GAME_BENCH_SET + 1)


def test_a_second_scoring_of_the_same_run_and_worlds_refuses_and_says_how_to_declare_a_new_set(
        tmp_path: Path) -> None:
    path = saved(tmp_path, "run-a", (0, "scored"))
    with pytest.raises(SetRefused) as refused:
        check_new_set(tmp_path, "run-a", 0, 0, 4, [])
    message = str(refused.value)
    assert "held-out set 0 of run run-a (worlds 7,100,001..7,100,004) was scored already" in message
    assert str(path) in message and "a held-out set is scored once" in message
    assert "declare a new set: --set 1 (worlds 7,110,001..7,110,004)" in message
    with pytest.raises(SetRefused, match="scored already"):  # a larger set over the same worlds too
        check_new_set(tmp_path, "run-a", 0, 0, 256, [])
    assert check_new_set(tmp_path, "run-a", 0, 1, 4, []) is None  # the new set is free
    assert check_new_set(tmp_path, "run-b", 0, 0, 4, []) is None  # another run's worlds are its own


def test_score_refuses_a_set_scored_already_before_it_plays_anything(tmp_path: Path) -> None:
    saved(tmp_path, "run-a", (0, "scored"))
    controller = FinalController(run_dir=tmp_path, run_id="run-a", seed=0, task="t", kind=CODE_PLAN, recorded="",
                                 skills={})
    with pytest.raises(SetRefused, match="scored already"):  # no env server behind this target: nothing played
        score(controller, "127.0.0.1:1", tmp_path, "again", 0, 4, [])


def test_the_command_refuses_a_second_scoring(tmp_path: Path, invoke: Callable[..., tuple[int, str]]) -> None:
    saved(tmp_path, "claude-relay-make_wood_pickaxe", (0, "scored"))
    code, output = invoke(main, "--run", str(RUN), "--episodes", "4", "--raw-root", str(tmp_path),
                          "--output", str(tmp_path / "B.md"))
    assert code == 1 and "refused: held-out set 0 of run claude-relay-make_wood_pickaxe" in output
    assert "--set 1" in output


def test_an_interrupted_declaration_is_scored_under_itself_and_a_clash_with_the_runs_worlds_refuses(
        tmp_path: Path) -> None:
    saved(tmp_path, "run-a", (0, "declared"))
    assert check_new_set(tmp_path, "run-a", 0, 0, 4, [])["declared_utc"] == "2026-11-28 10:00 UTC"
    with pytest.raises(SetRefused, match="scored already"):  # declared with other worlds: not the same set
        check_new_set(tmp_path, "run-a", 0, 0, 8, [])
    used = [WorldRange("training job-1, worker 6 (its config)", 7_000_021, 8_000_021)]
    with pytest.raises(SetRefused, match="overlaps the run's own training job-1, worker 6"):
        check_new_set(tmp_path, "run-a", 0, 1, 4, used)


def test_a_runs_trainings_bound_the_worlds_it_played(tmp_path: Path) -> None:
    (tmp_path / "job-1").mkdir()
    (tmp_path / "job-1" / "config.json").write_text(json.dumps({"config": {
        "seed": 5, "num_workers": 7, "envs_per_worker": 4, "env_frames": 20_000}}))
    state = RunState(frames_used=50_000, subtasks={"s": SubTaskState(name="s", job_id="job-1"),
                                                   "t": SubTaskState(name="t", job_id="job-2")})
    ranges = {r.purpose: (r.first, r.last) for r in run_world_ranges(5, state, tmp_path)}
    assert ranges["training job-1, worker 6 (its config)"] == (7_000_026, 7_020_030)
    first = worlds.training_worlds(5, 1)
    assert ranges["training job-2, worker 1 (assumed: the learner's defaults)"] == (first, first + 50_008)
