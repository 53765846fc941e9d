"""A job's files (config, state, progress, errors) and the local runner's process handle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgpt.errors import InvalidArgument
from rlgpt.v1 import common_pb2, learner_pb2
from services.learner.jobs import (
    JobRecord,
    LocalRunner,
    last_error,
    prepare_job_dir,
    read_progress,
    train_command,
    write_job_config,
)

CONFIG = learner_pb2.RLConfig(name="wood", task=common_pb2.TaskSpec(name="collect_wood"), env_frames=5000,
                              skills=["chop"], reward_terms=[common_pb2.RewardTerm(kind="success", weight=1.0)],
                              learning_rate=0.0003, seed=4)


def test_the_train_command_runs_the_train_module_on_the_job_dir() -> None:
    assert train_command(Path("/runs/jobs/j1")) == ["python", "-m", "services.learner.train", "/runs/jobs/j1"]
    assert train_command(Path("/j2"), "benchmarks.learner.inprocess") == [
        "python", "-m", "benchmarks.learner.inprocess", "/j2"]


def test_a_job_dir_readied_for_a_resume_keeps_nothing_that_would_end_it_at_once(tmp_path: Path) -> None:
    for name in ("stop", "error.json", "progress.jsonl"):
        (tmp_path / name).write_text("{}")
    prepare_job_dir(tmp_path, CONFIG, {"env_server": "127.0.0.1:5"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "progress.jsonl"]
    assert json.loads((tmp_path / "config.json").read_text())["env_server"] == "127.0.0.1:5"
    prepare_job_dir(tmp_path, CONFIG, {})  # nothing to remove: no error


def test_a_record_and_its_config_load_back(tmp_path: Path) -> None:
    write_job_config(tmp_path, CONFIG, {"env_server": "127.0.0.1:5", "device": "cpu"})
    doc = json.loads((tmp_path / "config.json").read_text())
    assert doc["env_server"] == "127.0.0.1:5" and doc["config"]["reward_terms"][0]["kind"] == "success"
    record = JobRecord("j1", tmp_path, CONFIG, state=learner_pb2.JOB_STATE_STOPPED, message="stopped",
                       started_at=12.5, resumes=2)
    record.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "state.json"]  # no temporary file left
    loaded = JobRecord.load(tmp_path)
    assert (loaded.job_id, loaded.config, loaded.state, loaded.message, loaded.started_at, loaded.resumes) == \
        ("j1", CONFIG, learner_pb2.JOB_STATE_STOPPED, "stopped", 12.5, 2)
    assert loaded.handle is None


@pytest.mark.parametrize(("config_text", "state_text"), [
    (None, '{"job_id": "j1", "state": "JOB_STATE_RUNNING"}'),
    ('{"config": {"env_frames": "many"}}', '{"job_id": "j1", "state": "JOB_STATE_RUNNING"}'),
    ('{"config": {}}', '{"job_id": "j1", "state": "JOB_STATE_DANCING"}'),
    ('{"config": {}}', '{"job_id": "j1"}'),
    ('{"config": {}}', '{"state": "JOB_STATE_RUNNING"}'),
    ('{"config": {}}', "{half"),
    ('{"config": {}}', '["JOB_STATE_RUNNING"]'),
    ("[]", '{"job_id": "j1", "state": "JOB_STATE_RUNNING"}'),
])
def test_an_unreadable_job_directory_is_invalid_argument_naming_its_files(tmp_path: Path, config_text: str | None,
                                                                          state_text: str) -> None:
    if config_text is not None:
        (tmp_path / "config.json").write_text(config_text)
    (tmp_path / "state.json").write_text(state_text)
    with pytest.raises(InvalidArgument, match=r"is unreadable .*fix or remove config\.json/state\.json"):
        JobRecord.load(tmp_path)


def test_read_progress_leaves_a_half_written_line_for_next_time(tmp_path: Path) -> None:
    assert read_progress(tmp_path) == []
    path = tmp_path / "progress.jsonl"
    path.write_text('{"env_frames": 1}\n{"env_frames": 2}\n{"env_fra')
    assert [r["env_frames"] for r in read_progress(tmp_path)] == [1, 2]
    assert [r["env_frames"] for r in read_progress(tmp_path, after_line=1)] == [2]
    with path.open("a") as f:
        f.write('mes": 3}\n')
    assert [r["env_frames"] for r in read_progress(tmp_path)] == [1, 2, 3]
    with path.open("a") as f:
        f.write('not json\n{"env_frames": 5}\n')
    assert [r["env_frames"] for r in read_progress(tmp_path)] == [1, 2, 3]  # stops at a broken line


def test_last_error_prefers_the_jobs_own_diagnosis_then_the_last_traceback(tmp_path: Path) -> None:
    assert last_error(tmp_path) == ""
    log = [f"line {i}" for i in range(30)]
    (tmp_path / "train.log").write_text("\n".join(log) + "\n")
    assert last_error(tmp_path) == "\n".join(log[-12:])
    assert last_error(tmp_path, lines=2) == "line 28\nline 29"
    first = ["Traceback (most recent call last):", "  File 'a.py'", "KeyError: 'old'"]
    last = ["Traceback (most recent call last):", "  File 'b.py', line 3", "ValueError: the real one"]
    (tmp_path / "train.log").write_text("\n".join([*log, *first, "more", *last, "after"]) + "\n")
    assert last_error(tmp_path) == "\n".join([*last, "after"])
    (tmp_path / "train.log").write_text("Traceback (most recent call last):\n" + "x" * 10_000 + "\n")
    assert last_error(tmp_path) == "x" * 3000  # the end of a long traceback, where its error is
    (tmp_path / "error.json").write_text('{"message": "env server at 10.1.1.1:5 went away"}')
    assert last_error(tmp_path) == "env server at 10.1.1.1:5 went away"
    (tmp_path / "error.json").write_text('{"no message": 1}')
    assert last_error(tmp_path) == "x" * 3000  # a useless error.json falls back to the log


def test_the_local_runner_does_not_adopt_jobs_after_a_restart(tmp_path: Path) -> None:
    assert LocalRunner().reattach("j1", tmp_path) is None


