"""The critic's verdicts: the checks' numbers, an LLM's diagnosis (test double), and how the two merge."""

from __future__ import annotations

import base64
import json

import pytest
from critic_samples import episode, has, request
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.llm import LLMClient
from rlgpt.llm.client import record_from_json, record_json
from rlgpt.v1 import common_pb2, critic_pb2
from services.critic.judge import CriticAnswer, Judge, deterministic_checks
from services.critic.prompt import PROMPT_DIR
from services.critic.settings import CriticSettings

SETTINGS = CriticSettings()
LLM_SETTINGS = LLMSettings(max_retries=0, backoff_seconds=0.01, timeout_seconds=5, model="scripted")
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def llm(server: FakeOpenAIServer, tmp_path) -> LLMClient:
    return LLMClient(LLM_SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm")


ANSWER = {"success": False, "diagnosis": "The skill walks left forever.", "suggestion": "Explore, then chop.",
          "target": "slow"}


def test_llm_verdict(tmp_path) -> None:
    req = request(rollouts=[episode(text="move_left x40\nend: time_limit"), episode(True)], code="def skill(a):\n")
    with FakeOpenAIServer([Reply.json(ANSWER)]) as server:
        verdict = Judge(SETTINGS, llm(server, tmp_path)).judge(req)
    assert verdict.diagnosis == ANSWER["diagnosis"] and verdict.suggestion == ANSWER["suggestion"]
    assert verdict.success_rate == 0.5 and not verdict.success
    assert verdict.target == critic_pb2.TARGET_SLOW  # the checks left the choice open
    prompt = server.requests[0]["messages"][0]["content"]
    assert "get_wood" in prompt and "achievement collect_wood" in prompt and "move_left x40" in prompt
    assert "  1 | def skill(a):" in prompt and "dead_loop" in prompt
    assert server.requests[0]["response_format"]["json_schema"]["name"] == "CriticAnswer"
    assert not any(f.startswith("llm_") for f in verdict.findings)


def test_llm_cannot_override_numbers_or_a_decisive_target(tmp_path) -> None:
    error = common_pb2.SkillError(type="KeyError", message="'tree'", line=2)
    req = request(rollouts=[episode(error=error)] * 3)
    with FakeOpenAIServer([Reply.json({**ANSWER, "success": True})]) as server:
        verdict = Judge(SETTINGS, llm(server, tmp_path)).judge(req)
    assert verdict.success_rate == 0 and not verdict.success
    assert has(list(verdict.findings), "llm_disagrees")
    assert verdict.target == critic_pb2.TARGET_FAST and has(list(verdict.findings), "llm_target_overruled")


def test_llm_failing_falls_back_to_the_checks(tmp_path) -> None:
    req = request(rollouts=[episode(death_cause="zombie", end_reason="death")])
    with FakeOpenAIServer([Reply(status=500)]) as server:
        verdict = Judge(SETTINGS, llm(server, tmp_path)).judge(req)
    assert len(server.requests) == 1  # max_retries=0
    assert has(list(verdict.findings), "llm_unavailable: Unavailable")
    assert "zombie" in verdict.diagnosis and verdict.suggestion
    assert verdict.target == critic_pb2.TARGET_FAST and verdict.success_rate == 0
    with FakeOpenAIServer([Reply(text="not json")]) as server:
        verdict = Judge(SETTINGS, llm(server, tmp_path)).judge(req)
    assert has(list(verdict.findings), "llm_unavailable: StructuredOutputError")


def test_a_copy_of_the_prompts_example_is_not_taken_for_a_diagnosis(tmp_path) -> None:
    # Gemma 3 270M answered the example's sand diagnosis word for word to every sub-task in bench-rlgpt.
    example = next(json.loads(line) for line in (PROMPT_DIR / "critic.txt").read_text().splitlines()
                   if line.startswith('{"success": false'))
    req = request(rollouts=[episode(death_cause="zombie", end_reason="death")] * 2)
    with FakeOpenAIServer([Reply.json({**example, "target": "slow"}), Reply.json(ANSWER)]) as server:
        judge = Judge(SETTINGS, llm(server, tmp_path))
        copied, own = judge.judge(req), judge.judge(req)
    checks = deterministic_checks(req, SETTINGS)
    assert copied.diagnosis == checks.diagnosis and "sand" not in copied.diagnosis + copied.suggestion
    assert copied.target == checks.target and has(list(copied.findings), "llm_copied_example")
    assert own.diagnosis == ANSWER["diagnosis"] and not any(f.startswith("llm_copied_") for f in own.findings)


def test_frames_go_as_image_parts_only_when_allowed(tmp_path) -> None:
    req = request(rollouts=[episode()], frames=[PNG, PNG])
    with FakeOpenAIServer([Reply.json(ANSWER)]) as server:
        Judge(SETTINGS, llm(server, tmp_path)).judge(req)
        Judge(CriticSettings(attach_frames=True), llm(server, tmp_path)).judge(req)
    assert isinstance(server.requests[0]["messages"][0]["content"], str)
    parts = server.requests[1]["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url"]
    assert parts[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


def test_the_llm_call_comes_back_as_a_record_without_its_images(tmp_path) -> None:
    req = request(rollouts=[episode()], frames=[PNG])
    with FakeOpenAIServer([Reply.json(ANSWER), Reply(status=500)]) as server:
        judge = Judge(CriticSettings(attach_frames=True), llm(server, tmp_path))
        verdict, record = judge.judge_with_record(req)
        assert record is not None and record.agent == "critic" and record.completion_tokens == 7
        assert verdict.diagnosis == ANSWER["diagnosis"]
        text = record_json(record)
        assert "base64" not in text and "(image left out of the record)" in text
        again = record_from_json(text)
        assert again.parsed == record.parsed and again.prompt_tokens == record.prompt_tokens
        _, failed = judge.judge_with_record(req)  # the LLM fails: no record, the checks' verdict
        assert failed is None
    with pytest.raises(ValueError, match="not an LLM call record"):
        record_from_json('{"agent": "critic"}')


def test_keep_is_an_answer_only_where_the_attempt_passed(tmp_path) -> None:
    passed = request(rollouts=[episode(True, achievements=["collect_wood"])] * 4)
    failed = request(rollouts=[episode(True), episode(), episode(), episode()])  # 25%: not decisive
    with FakeOpenAIServer([Reply.json({**ANSWER, "success": True, "target": "keep"}),
                           Reply.json({**ANSWER, "success": True, "target": "keep"}),
                           Reply.json({**ANSWER, "target": "fast"})]) as server:
        judge = Judge(CriticSettings(llm_on_pass=True), llm(server, tmp_path))
        kept = judge.judge(passed)
        assert kept.success and kept.target == critic_pb2.TARGET_KEEP and not any(
            f.startswith("llm_target_overruled") for f in kept.findings)
        wrong = judge.judge(failed)  # "keep" for a failing attempt: the checks' target stands
        assert not wrong.success and wrong.target == critic_pb2.TARGET_FAST
        assert has(list(wrong.findings), "llm_target_overruled: the LLM chose keep")
        revise = judge.judge(passed)  # a passed attempt is kept whatever the LLM says
        assert revise.target == critic_pb2.TARGET_KEEP and has(list(revise.findings), "llm_target_overruled")
    assert '"keep"' in json.dumps(CriticAnswer.model_json_schema())


def test_a_passed_attempt_costs_no_llm_call_by_default(tmp_path) -> None:
    passed = request(rollouts=[episode(True, achievements=["collect_wood"])] * 4)
    with FakeOpenAIServer([Reply.json({**ANSWER, "target": "fast"})]) as server:
        verdict, record = Judge(SETTINGS, llm(server, tmp_path)).judge_with_record(passed)
        failed = Judge(SETTINGS, llm(server, tmp_path)).judge(request(rollouts=[episode(True), episode()]))
    assert verdict.target == critic_pb2.TARGET_KEEP and record is None
    assert has(list(verdict.findings), "llm_not_asked: the attempt passed")
    assert not any(f.startswith("llm_not_asked") for f in failed.findings)  # a failed one is still asked


