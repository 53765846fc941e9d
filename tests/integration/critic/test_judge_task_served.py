"""JudgeTask over real gRPC: a critic server with a test double of the LLM server judges a whole task's
evaluation (the verdict, its link and death causes, the LLM's record); bad requests get INVALID_ARGUMENT naming
the value and its range, a failing LLM the checks' verdict, and the server keeps serving."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest
from critic_samples import episode, link, served_critic, task_request
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.llm import LLMClient
from rlgpt.v1 import critic_pb2, critic_pb2_grpc
from services.critic.settings import CriticSettings

LIMITS = CriticSettings(max_rollouts=8, max_code_bytes=512)
ANSWER = {"diagnosis": "make_b dies at night.", "suggestion": "Shelter before night.", "target": "slow",
          "subtask": ""}
EPISODES = [episode(True, stages_done=[True, True])] + [
    episode(stages_done=[True, False], end_reason="death", death_cause="zombie",
            text="go x9\nmake_b x3\nend: death (zombie)")] * 2 + [episode(stages_done=[True, False])]


def replies(request: dict) -> Reply:
    """The whole task's answer; a task named "llm_fails" gets a server error."""
    prompt = request["messages"][0]["content"]
    return Reply(status=500) if "Task: llm_fails" in prompt else Reply.json(ANSWER)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[critic_pb2_grpc.CriticServiceStub, FakeOpenAIServer]]:
    """The critic's gRPC server on a free port with an LLM client of the test double."""
    with FakeOpenAIServer([replies]) as fake:
        llm = LLMClient(LLMSettings(max_retries=0, timeout_seconds=5, model="scripted"), base_url=fake.base_url,
                        record_dir=tmp_path_factory.mktemp("llm"))
        with served_critic(LIMITS, llm) as stub:
            yield stub, fake


def test_a_whole_task_is_judged_with_the_llms_record(served) -> None:
    stub, fake = served
    response = stub.JudgeTask(task_request(episodes=EPISODES, game="Some Game", iteration=1))
    verdict = response.verdict
    assert verdict.success_rate == 0.25 and not verdict.success
    assert dict(verdict.death_causes) == {"zombie": 2}
    assert verdict.target == critic_pb2.TARGET_SLOW and verdict.subtask == "make_b"  # slow: the weakest is revised too
    assert (verdict.diagnosis, verdict.suggestion) == (ANSWER["diagnosis"], ANSWER["suggestion"])
    assert "deaths: zombie 2 of 3 failed episodes" in verdict.findings
    asked = fake.requests[-1]
    assert asked["response_format"]["json_schema"]["name"] == "TaskVerdictAnswer"
    prompt = asked["messages"][0]["content"]
    assert "in the game Some Game" in prompt and "2. make_b (code), hands over when achievement make_b" in prompt
    assert "    end: death (zombie)" in prompt
    record = json.loads(response.llm_record)
    assert record["agent"] == "critic_task" and record["parsed"]["target"] == "slow"


def test_a_failing_llm_gives_the_checks_verdict(served) -> None:
    stub, _fake = served
    response = stub.JudgeTask(task_request(task="llm_fails", episodes=EPISODES[:1] + EPISODES[3:] * 3))
    verdict = response.verdict
    assert verdict.target == critic_pb2.TARGET_FAST and verdict.subtask == "make_b"
    assert verdict.diagnosis.startswith("The whole task succeeded in 1/4 episodes (25%; target 75%).")
    assert any(f.startswith("llm_unavailable: Unavailable") for f in verdict.findings)


@pytest.mark.parametrize(("fields", "needle"), [
    ({"target_success": 1.5}, "target_success=1.5: must be in 0..1"),
    ({"target_success": -1.0}, "target_success=-1: must be in 0..1"),
    ({"episodes": [episode()] * 9}, "episodes has 9 entries; the limit is 8"),
    ({"episodes": [episode(text="x" * 513)]}, "episodes[0].text is 513 chars; the limit is 512"),
    ({"links": [link("get_a", 2, 3)]}, "links[0]: reached=2 succeeded=3"),
    ({"links": [link("get_a", 1, 0, own=2.0)]}, "links[0].own_success_rate=2: must be in 0..1, or -1"),
    ({"task": ""}, "task: must name the task"),
])
def test_bad_requests_are_invalid_argument(served, fields, needle) -> None:
    assert needle in refusal(served[0], task_request(**fields))


def refusal(stub: critic_pb2_grpc.CriticServiceStub, request: critic_pb2.JudgeTaskRequest) -> str:
    """The details of the server's refusal, which must be INVALID_ARGUMENT."""
    with pytest.raises(grpc.RpcError) as info:
        stub.JudgeTask(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    return info.value.details()


def test_an_empty_request_is_refused_and_the_server_serves_on(served) -> None:
    stub, _fake = served
    details = refusal(stub, critic_pb2.JudgeTaskRequest(target_success=2.0))
    assert "task: must name" in details and "target_success=2: must be in 0..1" in details
    assert "target_success is inf; it must be a finite number" in refusal(
        stub, critic_pb2.JudgeTaskRequest(target_success=float("inf")))
    unlinked = stub.JudgeTask(task_request(links=[], episodes=[episode()] * 2)).verdict
    assert unlinked.target == critic_pb2.TARGET_SLOW and unlinked.subtask == ""
