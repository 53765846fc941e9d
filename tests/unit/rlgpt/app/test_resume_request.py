"""``rlgpt run --resume``: the CLI asks a planner for a run by its id only (a planner resumes no run outside its
runs directory); a local run directory gives its name as the id and its folder to the planner started here."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlgpt.app.runner import RunOptions, _resume_request
from rlgpt.errors import FailedPrecondition

RUN_ID = "collect_wood__20261128-120000__abc123"


def options(runs_dir: Path, planner: str = "") -> RunOptions:
    return RunOptions(task="collect_wood", success="", mode="rl-gpt", agents="slow-fast-critic", resume=None,
                      runs_dir=runs_dir, planner=planner)


def test_a_local_run_directory_is_resumed_by_id_on_the_planner_started_in_its_folder(tmp_path: Path) -> None:
    run_dir = tmp_path / "elsewhere" / RUN_ID
    run_dir.mkdir(parents=True)
    (run_dir / "request.json").write_text("{}")
    opts = options(tmp_path / "runs")
    request = _resume_request(opts, run_dir)
    assert request.resume_run_id == RUN_ID and not request.resume_run_dir  # no path goes to the planner
    assert opts.runs_dir == run_dir.resolve().parent  # the runs directory the CLI gives the planner it starts


def test_with_a_planner_the_last_part_of_what_was_given_is_the_id(tmp_path: Path) -> None:
    for given in (Path(RUN_ID), tmp_path / "client" / RUN_ID):
        request = _resume_request(options(tmp_path, planner="10.0.0.1:50054"), given)
        assert request.resume_run_id == RUN_ID and not request.resume_run_dir


def test_a_missing_local_run_directory_is_said_before_any_service_starts(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match="not a run directory"):
        _resume_request(options(tmp_path), tmp_path / "nope")
    assert _resume_request(options(tmp_path), Path(RUN_ID)).resume_run_id == RUN_ID  # an id: the planner looks
