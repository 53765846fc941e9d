"""Saving a run's report from the planner (``GetRunReport``) into a local folder: report.md, its plots and the
final controller's GIFs (``animations/...``).

The names come from another process: each must be a relative path of plain parts that stays inside the local
folder; anything else ("..", an absolute path, a hidden part, a backslash) refuses the whole report.
"""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath

import grpc

from rlgpt import deadlines
from rlgpt.errors import Unavailable
from rlgpt.v1 import planner_pb2, planner_pb2_grpc

log = logging.getLogger(__name__)

MAX_REPORT_BYTES = 512 << 20
"""A report larger than this in all is refused (a planner's report is a few MiB)."""
MAX_DEPTH = 3
"""Path parts a report file's name may have at most (``animations/final_success.gif`` has two)."""


def local_path(local_dir: Path, name: str) -> Path:
    """Where the report file ``name`` goes under ``local_dir``; Unavailable when the name is not a plain relative
    path inside it."""
    parts = PurePosixPath(name).parts
    plain = (name and "\\" not in name and "\x00" not in name and not name.startswith("/")
             and 0 < len(parts) <= MAX_DEPTH and all(p not in (".", "..") and not p.startswith(".") for p in parts)
             and "/".join(parts) == name)
    path = local_dir.joinpath(*parts)
    if not plain or not path.resolve().is_relative_to(local_dir.resolve()):
        raise Unavailable(f"the planner sent a report file named {name[:80]!r}, not a plain path inside the run's "
                          "report folder")
    return path


def fetch_report(stub: planner_pb2_grpc.PlannerServiceStub, run_id: str, local_dir: Path) -> Path | None:
    """Saves a run's report (``GetRunReport``: report.md, its plots, its GIFs) into ``local_dir``; returns the local
    report.md, or None when the planner has no report for the run (FAILED_PRECONDITION)."""
    files: dict[str, bytearray] = {}
    sizes: dict[str, int] = {}
    total = 0
    try:
        asked = planner_pb2.GetRunReportRequest(run_id=run_id)
        for chunk in stub.GetRunReport(asked, timeout=deadlines.REPORT_SECONDS):
            local_path(local_dir, chunk.name)  # refused before a byte is kept
            data = files.setdefault(chunk.name, bytearray())
            if chunk.offset != len(data):
                raise Unavailable(f"the planner sent {chunk.name} out of order (offset {chunk.offset}, "
                                  f"{len(data)} bytes so far)")
            total += len(chunk.content)
            if total > MAX_REPORT_BYTES:
                raise Unavailable(f"the report of run {run_id} is larger than {MAX_REPORT_BYTES >> 20} MiB")
            data += chunk.content
            sizes[chunk.name] = chunk.size
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
            log.warning("no report for run %s: %s", run_id, exc.details())
            return None
        raise Unavailable(f"the report of run {run_id} could not be fetched: {exc.code().name}: "
                          f"{exc.details()}") from None
    short = [name for name, data in files.items() if len(data) != sizes[name]]
    if short or "report.md" not in files:
        raise Unavailable(f"the report of run {run_id} came incomplete: "
                          f"{', '.join(short) if short else 'report.md'} missing bytes")
    local_dir.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        path = local_path(local_dir, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(data))
    return local_dir / "report.md"
