"""StartRun's resume over real gRPC (a live env server): a client resumes only the planner's own runs, by id; a
run directory anywhere else is NOT_FOUND, untouched, and the answer reveals nothing of the planner's disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from served_support import served

from rlgpt.v1 import common_pb2, planner_pb2, planner_pb2_grpc
from services.planner.servicer import SERVICE_NAME, PlannerServicer
from services.planner.settings import PlannerSettings

RUN_ID = "collect_wood__20261128-120000__abc123"


class UnusedLLM:
    """The planner's LLM in these tests: a finished run asks it nothing."""

    model = "unused"

    def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a finished run asked the LLM")


def finished_run(run_dir: Path) -> Path:
    """A run directory whose run is finished (a resume of it ends at once: report, run_end)."""
    run_dir.mkdir(parents=True)
    request = planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"), seed=3)
    (run_dir / "request.json").write_text(json_format.MessageToJson(request))
    (run_dir / "state.json").write_text(json.dumps({"finished": True, "final": {
        "episodes": 4, "frames_used": 10, "controller": "chain of coded skills", "success_rate": 0.5}}))
    (run_dir / "events.jsonl").write_text("")
    return run_dir


@pytest.fixture
def planner(env_server, tmp_path):
    """A planner over real gRPC with ``tmp_path/runs`` as its runs directory."""
    settings = PlannerSettings(env_server=env_server.target, run_dir=str(tmp_path / "runs"),
                               library_path=str(tmp_path / "library.json"), eval_episodes=4)
    servicer = PlannerServicer(settings, UnusedLLM())
    with served(SERVICE_NAME, planner_pb2_grpc.add_PlannerServiceServicer_to_server, servicer) as channel:
        yield planner_pb2_grpc.PlannerServiceStub(channel)
    servicer.close()


def refused(stub: planner_pb2_grpc.PlannerServiceStub, request: planner_pb2.StartRunRequest) -> str:
    """StartRun's NOT_FOUND details; the answer is short and the server goes on serving."""
    with pytest.raises(grpc.RpcError) as info:
        stub.StartRun(request)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND, info.value.details()
    details = info.value.details()
    assert len(details) < 300
    return details


def test_a_run_directory_outside_the_runs_directory_is_not_found_and_left_untouched(planner, tmp_path) -> None:
    outside = finished_run(tmp_path / "copied" / "deep" / RUN_ID)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    details = refused(planner, planner_pb2.StartRunRequest(resume_run_dir=str(outside)))
    assert str(outside)[:61] not in details and RUN_ID not in details  # at most a 60-char prefix of what was sent
    assert "request.json" not in details
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before  # no event appended, no status written
    # The same name given as an id is looked for among the planner's own runs only.
    details = refused(planner, planner_pb2.StartRunRequest(resume_run_id=RUN_ID))
    assert str(tmp_path) not in details
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before


@pytest.mark.parametrize("path", ["/etc", "/", "/tmp", "../../etc/passwd", "runs/../../etc", "/etc/" + "x" * 3000])
def test_an_arbitrary_path_is_not_found_without_saying_what_is_on_the_disk(planner, path) -> None:
    details = refused(planner, planner_pb2.StartRunRequest(resume_run_dir=path))
    assert "request.json" not in details and "missing" not in details and "is not a run directory" not in details
    assert "x" * 100 not in details  # at most a short prefix of what was sent


def test_a_symlink_in_the_runs_directory_does_not_lead_out_of_it(planner, tmp_path) -> None:
    outside = finished_run(tmp_path / "elsewhere" / RUN_ID)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "linked").symlink_to(outside, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    details = refused(planner, planner_pb2.StartRunRequest(resume_run_id="linked"))
    assert "elsewhere" not in details
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before


def test_a_run_of_the_runs_directory_resumes_by_id_and_by_the_run_dir_start_run_answered(planner, tmp_path) -> None:
    run_dir = finished_run(tmp_path / "runs" / RUN_ID)
    for request in (planner_pb2.StartRunRequest(resume_run_id=RUN_ID),
                    planner_pb2.StartRunRequest(resume_run_dir=str(run_dir))):  # StartRunResponse.run_dir's form
        started = planner.StartRun(request)
        assert started.run_id == RUN_ID
        events = list(planner.WatchRun(planner_pb2.WatchRunRequest(run_id=RUN_ID), timeout=60))
        assert events[-1].WhichOneof("payload") == "run_end" and events[-1].run_end.success_rate == 0.5
        assert (run_dir / "report.md").is_file()
    assert (run_dir / "events.jsonl").read_text().count("runEnd") == 2
    # The planner is healthy after every refusal above: it still answers.
    assert planner.GetRun(planner_pb2.GetRunRequest(run_id=RUN_ID)).state == planner_pb2.RUN_STATE_DONE
