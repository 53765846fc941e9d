"""`rlgpt serve env --port 0` as a user starts it: health, reflection, metrics, graceful SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from rlgpt.v1 import env_pb2, env_pb2_grpc


def test_serve_env_answers_health_reflection_and_metrics() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "rlgpt.app.cli", "serve", "env", "--port", "0",
                             "--metrics-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.search(r"RLGPT_READY service=env port=(\d+) metrics_port=(\d+)", line)
        assert match, line + proc.stderr.read(2000)
        port, metrics_port = int(match.group(1)), int(match.group(2))
        assert port > 0
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "rlgpt.v1.EnvService"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                                  timeout=10)
        services = {s.name for r in replies for s in r.list_services_response.service}
        assert "rlgpt.v1.EnvService" in services and "grpc.health.v1.Health" in services
        stub = env_pb2_grpc.EnvServiceStub(channel)
        session = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2), timeout=60)
        stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=[1, 2]), timeout=30)
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        assert 'rlgpt_env_steps_total{backend="crafter"} 2.0' in text
        assert "rlgpt_env_sessions_active 1.0" in text
        channel.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert "stopping" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_bad_settings_are_reported_together() -> None:
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "rlgpt.app.cli", "serve", "env", "--port", "70000",
                             "--max-sessions", "0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "port=70000" in result.stderr and "max_sessions=0" in result.stderr
    assert time.monotonic() - start < 60


def test_serve_llm_relay_answers_a_chat_from_a_file_and_stops_on_sigterm(tmp_path) -> None:
    import json
    import threading

    from rlgpt.config import LLMSettings
    from rlgpt.llm import LLMClient
    from services.critic.judge import CriticAnswer

    proc = subprocess.Popen([sys.executable, "-m", "rlgpt.app.cli", "serve", "llm-relay", "--dir", str(tmp_path),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.search(r"RLGPT_READY service=llm-relay port=(\d+) base_url=(\S+)", line)
        assert match, line + proc.stderr.read(2000)
        client = LLMClient(LLMSettings(model="relay", max_retries=0, timeout_seconds=30), base_url=match.group(2))
        out: dict = {}
        thread = threading.Thread(target=lambda: out.update(answer=client.complete(
            "critic", [{"role": "user", "content": "judge this"}], CriticAnswer)[0]))
        thread.start()
        request = tmp_path / "requests" / "0001.json"
        deadline = time.monotonic() + 20
        while not request.exists():
            assert time.monotonic() < deadline, proc.stderr.read(2000)
            time.sleep(0.05)
        assert json.loads(request.read_text())["agent"] == "critic"
        (tmp_path / "answers" / "0001.json").write_text(json.dumps(
            {"success": False, "diagnosis": "it walked into water", "suggestion": "check is_free", "target": "fast"}))
        thread.join(20)
        assert out["answer"].diagnosis == "it walked into water"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
