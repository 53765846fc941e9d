"""A benchmark trains through the learner's local runner (``benchmarks.training``): another training entry point,
the added environment, the launcher's pid, the progress shown while it runs, the wall-clock limit, and a stop that
leaves the job resumable. The training program is a few lines that speak the training process's file protocol."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.training import follow_training, launch_training, stop_training
from rlgpt.v1 import learner_pb2
from services.learner.jobs import prepare_job_dir, read_progress

pytestmark = pytest.mark.timeout(120)
TRAINING = '''
import json, os, sys, time
from pathlib import Path
job = Path(sys.argv[1])
(job / "env.json").write_text(json.dumps({"pid": os.environ.get("RLGPT_LEARNER_PID"),
                                          "unbuffered": os.environ.get("PYTHONUNBUFFERED")}))
print("training", flush=True)
frames = 0
while not (job / "stop").exists():
    frames += 100
    with (job / "progress.jsonl").open("a") as f:
        f.write(json.dumps({"env_frames": frames, "time": time.time()}) + "\\n")
    if frames >= int(json.loads((job / "config.json").read_text())["config"]["env_frames"]):
        sys.exit(0)
    time.sleep(0.05)
sys.exit(5)
'''


@pytest.fixture
def training_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "probe_training.py").write_text(TRAINING)
    monkeypatch.setenv("PYTHONPATH", str(folder))  # the runner puts the project first and keeps this
    return "probe_training"


def test_a_benchmark_training_runs_its_module_as_the_learner_runs_a_job(tmp_path: Path, training_module: str) -> None:
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    config = learner_pb2.RLConfig(name="probe", env_frames=500)
    prepare_job_dir(job_dir, config, {})
    shown: list[int] = []
    handle = launch_training(job_dir, config, training_module)
    assert follow_training(handle, job_dir, 60, lambda last: shown.append(last["env_frames"]), 0.02) == 0
    assert json.loads((job_dir / "env.json").read_text()) == {"pid": str(os.getpid()), "unbuffered": "1"}
    assert "training" in (job_dir / "train.log").read_text()
    assert shown and shown == sorted(shown) and read_progress(job_dir)[-1]["env_frames"] == 500


def test_a_training_past_its_time_is_stopped_resumable(tmp_path: Path, training_module: str) -> None:
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    config = learner_pb2.RLConfig(name="probe", env_frames=10**9)
    prepare_job_dir(job_dir, config, {})
    handle = launch_training(job_dir, config, training_module)
    try:
        assert follow_training(handle, job_dir, 0.5, lambda last: None, 0.05) is None
    finally:
        stop_training(handle, job_dir, grace=30)
    assert handle.poll() == 5  # it saw the stop request and exited by itself
    assert not (job_dir / "stop").exists()  # the next run resumes instead of stopping at once
