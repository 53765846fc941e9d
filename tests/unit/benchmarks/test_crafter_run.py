"""bench-crafter's training step: a job trained to its budget already is only summarised, never launched again; its
held-out evaluation plays bench-game's set of the same seed, apart from every training worker's worlds."""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.progress import Progress

from benchmarks.crafter.cli import main
from benchmarks.crafter.run import crafter_config, eval_worlds, held_out, train_job
from benchmarks.game.sets import declared_set
from rlgpt import worlds
from rlgpt.v1 import common_pb2, learner_pb2


def test_a_job_trained_to_its_budget_is_not_launched_again(tmp_path: Path) -> None:
    config = crafter_config("appo", 2000, 0, ())
    (tmp_path / "progress.jsonl").write_text(json.dumps({"env_frames": 2048, "elapsed": 9.0}) + "\n")
    (tmp_path / "stop").touch()  # left by an interrupted run
    servers = [types.SimpleNamespace(target="127.0.0.1:7")]
    with Progress(disable=True) as progress:
        assert train_job(tmp_path, config, servers, 60, progress, "appo") == 0  # a launch would fail the fast tier
    doc = json.loads((tmp_path / "config.json").read_text())
    assert doc["env_servers"] == ["127.0.0.1:7"] and doc["record_episodes"] and not (tmp_path / "stop").exists()


def test_the_held_out_worlds_are_bench_games_set_of_the_same_seed(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import services.learner.evaluate

    asked = {}

    def evaluate(job_dir: Path, target: str, episodes: int, seed: int, **kwargs: object) -> object:
        asked.update(episodes=episodes, seed=seed)
        return learner_pb2.EvaluateResponse(episodes=[common_pb2.EpisodeSummary(achievements=["collect_wood"])
                                                      for _ in range(episodes)])

    monkeypatch.setattr(services.learner.evaluate, "evaluate", evaluate)
    for seed, eval_set in ((0, 0), (3, 2)):
        held = held_out(tmp_path, "127.0.0.1:7", 16, seed, eval_set)
        first = worlds.game_bench_worlds(seed, eval_set)
        assert asked == {"episodes": 16, "seed": first} and first == declared_set(seed, eval_set, 16).first
        assert (held["first_seed"], held["set"], held["run_seed"]) == (first, eval_set, seed)
        assert [e["seed"] for e in held["episodes"]] == list(range(first, first + 16))
    assert held_out(tmp_path, "127.0.0.1:7", 4, 0)["first_seed"] == 7_100_001  # default: set 0, as bench-game's


def test_held_out_worlds_that_a_training_worker_could_reach_are_refused(invoke: Callable[..., tuple[int, str]]
                                                                        ) -> None:
    wanted = eval_worlds(0, 0, 256, 1_000_000)  # the benchmark's budget: far apart from both workers' worlds
    assert (wanted.first, wanted.last) == (7_100_001, 7_100_256)
    with pytest.raises(ValueError, match="overlaps training worker 1"):
        eval_worlds(0, 0, 256, 6_000_000)
    code, out = invoke(main, "--frames", "6000000", "--eval-episodes", "16", "--eval-set", "0")
    assert code == 2 and "overlaps training worker 1" in out


def test_the_help_names_bench_games_set(invoke: Callable[..., tuple[int, str]]) -> None:
    code, out = invoke(main, "--help")
    assert code == 0 and "--eval-set" in out and "bench-game's set K of a run with seed --seed" in out


@pytest.mark.parametrize(("trained", "scored"), [(1500, False), (2048, True)])
def test_only_a_policy_trained_to_its_budget_is_scored_on_held_out_worlds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trained: int, scored: bool) -> None:
    import benchmarks.crafter.run as run

    stopped = types.SimpleNamespace(target="127.0.0.1:7", stop=lambda: None)
    monkeypatch.setattr(run, "start_env_servers", lambda *args, **kwargs: ([stopped], ["collect_wood"]))

    def train(job_dir: Path, *args: object) -> None:  # a --timeout stop: a checkpoint short of the budget
        (job_dir / "progress.jsonl").write_text(json.dumps({"env_frames": trained, "elapsed": 9.0}) + "\n")

    monkeypatch.setattr(run, "train_job", train)
    monkeypatch.setattr(run, "held_out", lambda *args: {"first_seed": 7_100_001, "episodes": []})
    with Progress(disable=True) as progress:
        summary = run.run_variant("appo", tmp_path, 2000, 0, 60, progress, eval_episodes=4)
    assert (summary["held_out"] is not None) == scored and summary["complete"] == scored
