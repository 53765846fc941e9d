"""bench-crafter's training step: a job trained to its budget already is only summarised, never launched again."""

from __future__ import annotations

import json
import types
from pathlib import Path

from rich.progress import Progress

from benchmarks.crafter.run import crafter_config, train_job


def test_a_job_trained_to_its_budget_is_not_launched_again(tmp_path: Path) -> None:
    config = crafter_config("appo", 2000, 0, ())
    (tmp_path / "progress.jsonl").write_text(json.dumps({"env_frames": 2048, "elapsed": 9.0}) + "\n")
    (tmp_path / "stop").touch()  # left by an interrupted run
    servers = [types.SimpleNamespace(target="127.0.0.1:7")]
    with Progress(disable=True) as progress:
        assert train_job(tmp_path, config, servers, 60, progress, "appo") == 0  # a launch would fail the fast tier
    doc = json.loads((tmp_path / "config.json").read_text())
    assert doc["env_servers"] == ["127.0.0.1:7"] and doc["record_episodes"] and not (tmp_path / "stop").exists()
