"""The PlannerService over real gRPC, with the real env server and a test double of the LLM server."""

from __future__ import annotations

import grpc
import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings, PlannerSettings
from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.llm import LLMClient
from rlgpt.v1 import common_pb2, planner_pb2, planner_pb2_grpc
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.servicer import SERVICE_NAME, PlannerServicer

PLAN = {"rationale": "wood, then a cow", "subtasks": [
    {"name": "get_wood", "description": "collect wood", "success": [{"achievement": "collect_wood"}],
     "decision": "code", "skills": []},
    {"name": "eat_beef", "description": "eat a cow", "success": [{"achievement": "eat_cow"}], "decision": "rl",
     "skills": []}]}
SKILL = {"name": "get_wood", "description": "chop", "code": COLLECT_WOOD}
RL = {"primitive_actions": ["noop", "do", "move_left", "move_right", "move_up", "move_down"], "skills": [],
      "skill_max_steps": 1, "reward_terms": [{"kind": "success", "target": "", "weight": 1}], "episode_length": 400}


def by_schema(body: dict) -> Reply:
    """Answers by which schema the agent asked for, like a model would."""
    name = body["response_format"]["json_schema"]["name"]
    return Reply.json({"Plan": PLAN, "SkillAnswer": SKILL, "RLConfig": RL}[name])


@pytest.fixture
def planner(env_server, tmp_path):
    def start(script):
        fake = FakeOpenAIServer(script).__enter__()
        llm = LLMClient(LLMSettings(max_retries=1, backoff_seconds=0.01, timeout_seconds=5, model="local"),
                        base_url=fake.base_url, record_dir=tmp_path / "llm")
        settings = PlannerSettings(env_server=env_server.target, run_dir=str(tmp_path / "runs"),
                                   library_path=str(tmp_path / "library.json"), test_episodes=2, test_steps=150)
        servicer = PlannerServicer(settings, llm)
        server, port = create_server("127.0.0.1:0", [
            ServiceBinding(SERVICE_NAME, planner_pb2_grpc.add_PlannerServiceServicer_to_server, servicer)])
        channel = create_channel(f"127.0.0.1:{port}", default_timeout=120, wait_ready_seconds=10)
        started.append((fake, server, channel))
        return planner_pb2_grpc.PlannerServiceStub(channel)

    started: list = []
    yield start
    for fake, server, channel in started:
        channel.close()
        stop_server(server, 1)
        fake.__exit__(None)


def test_run_streams_plan_code_config_and_ends(planner, tmp_path) -> None:
    stub = planner([by_schema])
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="eat_cow"), seed=2))
    events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=120))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[:2] == ["llm", "plan"] and "code" in kinds and "config" in kinds
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    code = next(e.code for e in events if e.WhichOneof("payload") == "code")
    assert code.success_rate > 0 and code.skill == "get_wood"
    config = next(e.config for e in events if e.WhichOneof("payload") == "config")
    assert config.task.success[0].achievement == "eat_cow"
    status = stub.GetRun(planner_pb2.GetRunRequest(run_id=run.run_id))
    assert status.state == planner_pb2.RUN_STATE_DONE and status.tokens > 0
    run_dir = tmp_path / "runs" / run.run_id
    assert (run_dir / "events.jsonl").read_text().count("\n") == len(events)
    assert len(list((tmp_path / "llm").glob("*.json"))) == 3
    later = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id, after_seq=len(events) - 1)))
    assert len(later) == 1


def test_llm_failing_forever_ends_in_an_error_event(planner) -> None:
    stub = planner([Reply(status=500)])
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood")))
    events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=60))
    assert events[-1].WhichOneof("payload") == "error" and "failed 2 times" in events[-1].error.message
    assert stub.GetRun(planner_pb2.GetRunRequest(run_id=run.run_id)).state == planner_pb2.RUN_STATE_FAILED


def test_bad_requests(planner) -> None:
    stub = planner([by_schema])
    for request, code, needle in [
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="build_rocket")), "INVALID_ARGUMENT",
         "unknown task"),
        (planner_pb2.StartRunRequest(), "INVALID_ARGUMENT", "task"),
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"), mode="vibes"),
         "INVALID_ARGUMENT", "mode"),
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"),
                                     budgets=planner_pb2.Budgets(candidates=1000)), "INVALID_ARGUMENT", "candidates"),
    ]:
        with pytest.raises(grpc.RpcError) as info:
            stub.StartRun(request)
        assert info.value.code().name == code and needle in info.value.details()
    for call in (lambda: list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id="nope"))),
                 lambda: stub.GetRun(planner_pb2.GetRunRequest(run_id="nope"))):
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
