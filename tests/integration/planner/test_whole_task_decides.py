"""The whole task decides, over real gRPC with the real env server and critic and a scripted LLM (test double of
the OpenAI-compatible server): a run whose every sub-task is done but whose chain is below its target goes on to
another outer iteration, the critic's whole-task verdict sends the weak link back to the fast agent, and the
revision, better on the same worlds, is kept and stops the run at its target."""

from __future__ import annotations

import json

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.llm import LLMClient
from rlgpt.v1 import common_pb2, critic_pb2_grpc, planner_pb2, planner_pb2_grpc
from services.critic.servicer import SERVICE_NAME as CRITIC_SERVICE
from services.critic.servicer import CriticServicer
from services.critic.settings import CriticSettings
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.servicer import SERVICE_NAME, PlannerServicer
from services.planner.settings import PlannerSettings

pytestmark = pytest.mark.timeout(600)
PLAN = {"rationale": "wood is one coded step", "subtasks": [
    {"name": "get_wood", "description": "collect wood", "success": [{"achievement": "collect_wood"}],
     "decision": "code", "skills": []}]}
IDLE = "def get_wood(agent):\n    for _ in range(20):\n        yield 'noop'\n"


def test_a_run_below_its_target_goes_on_and_its_better_revision_is_kept(env_server, tmp_path) -> None:
    skills = iter([IDLE, COLLECT_WOOD])  # the first skill passes its test (the critic asks for 0%) and fails the task

    def reply(body: dict) -> Reply:
        name = body["response_format"]["json_schema"]["name"]
        if name == "SkillAnswer":
            return Reply.json({"name": "get_wood", "description": "chop", "code": next(skills)})
        return Reply.json({"Plan": PLAN}[name])

    critic, critic_port = create_server("127.0.0.1:0", [ServiceBinding(
        CRITIC_SERVICE, critic_pb2_grpc.add_CriticServiceServicer_to_server,
        CriticServicer(CriticSettings(success_threshold=0.0, use_llm=False)))])
    with FakeOpenAIServer([reply]) as fake:
        llm = LLMClient(LLMSettings(max_retries=0, timeout_seconds=10, model="scripted"), base_url=fake.base_url,
                        record_dir=tmp_path / "llm")
        settings = PlannerSettings(env_server=env_server.target, run_dir=str(tmp_path / "runs"),
                                   library_path=str(tmp_path / "library.json"), test_episodes=2, test_steps=150,
                                   critic=f"127.0.0.1:{critic_port}", skill_format="python")
        servicer = PlannerServicer(settings, llm)
        server, port = create_server("127.0.0.1:0", [
            ServiceBinding(SERVICE_NAME, planner_pb2_grpc.add_PlannerServiceServicer_to_server, servicer)])
        channel = create_channel(f"127.0.0.1:{port}", default_timeout=120, wait_ready_seconds=10)
        try:
            stub = planner_pb2_grpc.PlannerServiceStub(channel)
            run = stub.StartRun(planner_pb2.StartRunRequest(
                task=common_pb2.TaskSpec(name="collect_wood"), seed=4, budgets=planner_pb2.Budgets(
                    max_outer_iterations=3, target_success=0.75, eval_episodes=4, total_env_frames=0)))
            events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=500))
        finally:
            channel.close()
            stop_server(server, 1)
            stop_server(critic, 1)
    assert events[-1].WhichOneof("payload") == "run_end"
    state = json.loads((tmp_path / "runs" / run.run_id / "state.json").read_text())
    first, second = state["iterations"]
    assert first["success_rate"] == 0.0 and first["successes"] == [False] * 4
    # The idle skill's episodes run on until they die: the critic sends the plan back (deaths) and names the link
    # that loses them, which the fast agent revises.
    assert first["verdict"]["target"] == "TARGET_SLOW" and first["verdict"]["subtask"] == "get_wood"
    assert second["success_rate"] >= 0.75 and second["kept"].startswith("kept: better than iteration 0's")
    assert state["stop_reason"].startswith("the whole task reached its target")
    assert state["subtasks"]["get_wood"]["skill_code"] == COLLECT_WOOD
    fast_prompts = [r["messages"][0]["content"] for r in fake.requests
                    if r["response_format"]["json_schema"]["name"] == "SkillAnswer"]
    assert len(fast_prompts) == 2 and "In the whole task's chain" in fast_prompts[1]  # the verdict reached it
