"""The CriticService over real gRPC with a test double of the LLM server, and `rlgpt serve critic`."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import grpc
import pytest
from critic_samples import served_critic
from fakes.fake_openai import FakeOpenAIServer, Reply
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY

from rlgpt.config import LLMSettings
from rlgpt.llm import LLMClient
from rlgpt.v1 import common_pb2, critic_pb2, critic_pb2_grpc
from services.critic.servicer import SERVICE_NAME
from services.critic.settings import CriticSettings

SETTINGS = CriticSettings(max_rollouts=4, max_code_bytes=256, max_frames=1, max_frame_bytes=2048,
                          max_curve_points=8)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
ANSWER = {"success": False, "diagnosis": "It never finds a tree.", "suggestion": "Explore first.", "target": "fast"}


def good(**fields) -> critic_pb2.JudgeRequest:
    return critic_pb2.JudgeRequest(**{
        "subtask": "get_wood", "decision": "code", "success": [common_pb2.Condition(achievement="collect_wood")],
        "rollouts": [common_pb2.EpisodeSummary(success=True, steps=40, end_reason="success",
                                               achievements=["collect_wood"]),
                     common_pb2.EpisodeSummary(steps=300, end_reason="time_limit", text="move_up x80\nend: x")],
        "code": "def skill(agent):\n    yield 'do'\n", **fields})


@pytest.fixture(scope="module")
def critic(tmp_path_factory):
    fake = FakeOpenAIServer([Reply.json(ANSWER)]).__enter__()
    llm = LLMClient(LLMSettings(max_retries=0, timeout_seconds=5, model="scripted"), base_url=fake.base_url,
                    record_dir=tmp_path_factory.mktemp("llm"))
    try:
        with served_critic(SETTINGS, llm) as stub:
            yield stub, fake
    finally:
        fake.__exit__(None)


def test_judge_round_trip(critic) -> None:
    stub, fake = critic
    labels = {"outcome": "failure", "target": "fast"}
    before = REGISTRY.get_sample_value("rlgpt_critic_verdicts_total", labels) or 0.0
    verdict = stub.Judge(good(frames=[PNG])).verdict
    assert REGISTRY.get_sample_value("rlgpt_critic_verdicts_total", labels) == before + 1
    assert REGISTRY.get_sample_value("rlgpt_critic_judge_seconds_count") >= 1
    assert verdict.success_rate == 0.5 and not verdict.success
    assert verdict.diagnosis == ANSWER["diagnosis"] and verdict.target == critic_pb2.TARGET_FAST
    assert any(f.startswith("dead_loop: move_up x80") for f in verdict.findings)
    assert "get_wood" in fake.requests[-1]["messages"][0]["content"]  # frames off: plain text


@pytest.mark.parametrize(("fields", "needle"), [
    ({"subtask": " "}, "subtask"),
    ({"decision": "vibes"}, "decision='vibes'"),
    ({"rollouts": [common_pb2.EpisodeSummary()] * 5}, "rollouts has 5 entries; the limit is 4"),
    ({"code": "x" * 257}, "code is 257 chars; the limit is 256"),
    ({"frames": [PNG, PNG]}, "frames has 2 entries; the limit is 1"),
    ({"frames": [PNG + b"\x00" * 4096]}, "frames[0]"),
    ({"frames": [b"GIF89a"]}, "not a PNG"),
    ({"curve": [critic_pb2.CurvePoint(env_frames=i) for i in range(9)]}, "curve has 9 entries; the limit is 8"),
    ({"curve": [critic_pb2.CurvePoint(env_frames=5), critic_pb2.CurvePoint(env_frames=1)]}, "ordered"),
    ({"curve": [critic_pb2.CurvePoint(success_rate=1.5)]}, "success_rate must be in 0..1"),
    ({"rl_config": "{" * 257}, "rl_config is 257 chars; the limit is 256"),
    ({"rl_config": "primitive_actions: [do]"}, "rl_config: not JSON"),
    ({"rl_config": "[1, 2]"}, "rl_config: a JSON object is needed, not list"),
])
def test_bad_requests_are_invalid_argument(critic, fields, needle) -> None:
    stub, _fake = critic
    with pytest.raises(grpc.RpcError) as info:
        stub.Judge(good(**fields))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and needle in info.value.details()


def test_still_serves_after_bad_requests(critic) -> None:
    stub, _fake = critic
    for _ in range(2):
        with pytest.raises(grpc.RpcError):
            stub.Judge(critic_pb2.JudgeRequest())
    assert stub.Judge(good()).verdict.success_rate == 0.5


def test_serve_critic_without_llm() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "rlgpt.app.cli", "serve", "critic", "--port", "0", "--metrics-port",
                             "-1", "--no-llm"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.search(r"RLGPT_READY service=critic port=(\d+)", line)
        assert match, line + proc.stderr.read(2000)
        channel = grpc.insecure_channel(f"127.0.0.1:{match.group(1)}")
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME),
                                                          timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        verdict = critic_pb2_grpc.CriticServiceStub(channel).Judge(good(), timeout=10).verdict
        assert verdict.success_rate == 0.5 and verdict.diagnosis.startswith("1/2 test episodes")
        assert not any(f.startswith("llm_") for f in verdict.findings)
        channel.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
