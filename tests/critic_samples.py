"""Hand-made episodes, curves and judge requests shared by the critic's tests."""

from __future__ import annotations

from rlgpt.v1 import common_pb2, critic_pb2

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
