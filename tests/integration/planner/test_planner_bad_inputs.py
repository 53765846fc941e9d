"""Every field of the planner's requests, generated from planner.proto, at 5 MB, 100,000 entries, control
characters, a lone surrogate, NaN, infinity and integer extremes, sent to a real planner (over the shared env
server) on a loopback channel (issue 38): never INTERNAL or UNKNOWN, every message under 300 bytes, the planner
serving after each. The planner has no LLM, so no call starts a run."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from bad_input_support import bad_cases, check_case
from served_support import served

from rlgpt.v1 import common_pb2, planner_pb2, planner_pb2_grpc
from services.planner.servicer import SERVICE_NAME, PlannerServicer
from services.planner.settings import PlannerSettings

BASES = {"StartRun": planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"))}
CASES = bad_cases(planner_pb2.DESCRIPTOR.services_by_name["PlannerService"], BASES)


@pytest.fixture(scope="module")
def channel(env_server, tmp_path_factory) -> Iterator[grpc.Channel]:
    home = tmp_path_factory.mktemp("planner_bad_inputs")
    settings = PlannerSettings(env_server=env_server.target, run_dir=str(home / "runs"),
                               library_path=str(home / "library.json"))
    with served(SERVICE_NAME, planner_pb2_grpc.add_PlannerServiceServicer_to_server,
                PlannerServicer(settings, None)) as channel:
        yield channel


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_field(channel: grpc.Channel, case) -> None:
    check_case(channel, case, SERVICE_NAME)


def test_the_issues_example_is_invalid_argument(channel: grpc.Channel) -> None:
    """A 5 MB resume_run_dir (it was INTERNAL: File name too long) names the field and the limit, which
    DescribePlanner serves."""
    stub = planner_pb2_grpc.PlannerServiceStub(channel)
    limits = stub.DescribePlanner(planner_pb2.DescribePlannerRequest()).requests
    assert limits.fields["StartRunRequest.resume_run_dir"] == 4096 and limits.max_list_entries == 256
    with pytest.raises(grpc.RpcError) as info:
        stub.StartRun(planner_pb2.StartRunRequest(resume_run_dir="/" * 5_000_000), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "resume_run_dir is 5000000 chars; the limit is 4096"
