"""Hand-made episodes, curves and judge requests shared by the critic's tests, and a critic served over gRPC."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.prompts import CompletesJSON
from rlgpt.v1 import common_pb2, critic_pb2, critic_pb2_grpc
from services.critic.servicer import SERVICE_NAME, CriticServicer
from services.critic.settings import CriticSettings

WOOD = [common_pb2.Condition(achievement="collect_wood")]


def episode(success: bool = False, **fields) -> common_pb2.EpisodeSummary:
    defaults = {"steps": 100, "end_reason": "success" if success else "time_limit", "text": "noop x3\nend: ..."}
    return common_pb2.EpisodeSummary(success=success, **{**defaults, **fields})


def request(**fields) -> critic_pb2.JudgeRequest:
    return critic_pb2.JudgeRequest(**{"subtask": "get_wood", "description": "collect wood", "success": WOOD,
                                      "decision": "code", **fields})


def curve(rates, returns=None) -> list[critic_pb2.CurvePoint]:
    returns = returns or [0.0] * len(rates)
    return [critic_pb2.CurvePoint(env_frames=1000 * (i + 1), success_rate=r, mean_return=m)
            for i, (r, m) in enumerate(zip(rates, returns, strict=True))]


def has(findings: list[str], prefix: str) -> str:
    match = [f for f in findings if f.startswith(prefix)]
    assert match, (prefix, findings)
    return match[0]


def link(subtask: str, reached: int, succeeded: int, own: float = -1.0, decision: str = "code"
         ) -> critic_pb2.TaskLink:
    """A link of a whole task's chain; its conditions are its name as an achievement."""
    return critic_pb2.TaskLink(subtask=subtask, decision=decision, reached=reached, succeeded=succeeded,
                               success=[common_pb2.Condition(achievement=subtask)], mean_frames=50.0,
                               own_success_rate=own)


def task_request(**fields) -> critic_pb2.JudgeTaskRequest:
    """A whole task's evaluation: two links by default, no episodes unless given, target 0.75."""
    return critic_pb2.JudgeTaskRequest(**{
        "task": "make_b", "description": "make b", "success": [common_pb2.Condition(achievement="make_b")],
        "links": [link("get_a", 4, 3), link("make_b", 3, 1)], "target_success": 0.75, **fields})


@contextlib.contextmanager
def served_critic(settings: CriticSettings, llm: CompletesJSON | None) -> Iterator[critic_pb2_grpc.CriticServiceStub]:
    """A critic's gRPC server on a free loopback port (integration tests only) and a stub over a real channel."""
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(SERVICE_NAME, critic_pb2_grpc.add_CriticServiceServicer_to_server,
                       CriticServicer(settings, llm))], metrics_label="critic")
    channel = create_channel(f"127.0.0.1:{port}", default_timeout=30, wait_ready_seconds=10)
    try:
        yield critic_pb2_grpc.CriticServiceStub(channel)
    finally:
        channel.close()
        stop_server(server, 1)
