"""A run's report from the planner to the client: GetRunReport's chunks carry report.md, the plots and the GIFs
under animations/ (paths relative to the run directory, no link followed); the client writes each under the run's
local folder and refuses a name that would leave it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgpt.app.report_fetch import fetch_report, local_path
from rlgpt.errors import Unavailable
from rlgpt.v1 import planner_pb2
from services.planner.report import report_chunks, report_files, write_run_report
from services.planner.state import RunState


class _Stub:
    """The planner's GetRunReport, answered from a list of chunks (no server)."""

    def __init__(self, chunks: list[planner_pb2.ReportChunk]):
        self.chunks = chunks

    def GetRunReport(self, request: planner_pb2.GetRunReportRequest, timeout: float):
        return iter(self.chunks)


def _run_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    RunState(final={"episodes": 2, "success_rate": 0.5, "animations": {"success": "animations/final_success.gif"}}
             ).save(run_dir)
    (run_dir / "request.json").write_text(json.dumps({"task": {"name": "t"}}))
    write_run_report(run_dir)
    (run_dir / "animations").mkdir()
    (run_dir / "animations" / "final_success.gif").write_bytes(b"GIF89a" + bytes(3000))
    (run_dir / "animations" / "final_failure.gif").write_bytes(b"GIF89a")
    return run_dir


def test_the_gifs_travel_with_the_report(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    (run_dir / "animations" / "notes.txt").write_text("not sent")
    (run_dir / "animations" / "elsewhere.gif").symlink_to(run_dir / "state.json")  # a link is not followed
    assert report_files(run_dir) == ["report.md", "curves.png", "iterations.png", "animations/final_failure.gif",
                                     "animations/final_success.gif"]
    chunks = list(report_chunks(run_dir, chunk_bytes=1000))
    local = tmp_path / "local"
    assert fetch_report(_Stub(chunks), "run-1", local) == local / "report.md"
    for name in report_files(run_dir):
        assert (local / name).read_bytes() == (run_dir / name).read_bytes()
    assert "![success](animations/final_success.gif)" in (local / "report.md").read_text()


@pytest.mark.parametrize("name", ["../escape.gif", "animations/../../escape.gif", "/tmp/escape.gif", ".hidden",
                                  "animations/.x.gif", "a\\b.gif", "animations//x.gif", "", "./report.md"])
def test_a_name_that_leaves_the_folder_is_refused(tmp_path: Path, name: str) -> None:
    local = tmp_path / "local"
    chunks = [planner_pb2.ReportChunk(name="report.md", offset=0, content=b"# r", size=3),
              planner_pb2.ReportChunk(name=name, offset=0, content=b"x", size=1)]
    with pytest.raises(Unavailable, match="not a plain path inside the run's report folder"):
        fetch_report(_Stub(chunks), "run-1", local)
    assert not local.exists() and not (tmp_path / "escape.gif").exists()


def test_a_link_in_the_local_folder_does_not_lead_out(tmp_path: Path) -> None:
    local = tmp_path / "local"
    local.mkdir()
    (local / "animations").symlink_to(tmp_path)
    with pytest.raises(Unavailable, match="not a plain path"):
        local_path(local, "animations/final_success.gif")
    assert local_path(local, "report.md") == local / "report.md"
