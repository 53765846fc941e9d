"""The env server's checks of a session request that need a backend unlike the two shipped ones."""

from __future__ import annotations

import dataclasses

import pytest

from rlgpt.errors import InvalidArgument
from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.backends.crafter import CrafterBackend
from services.env_server.sessions.session_builder import plan_interrupt
from services.env_server.settings import EnvServerSettings


class QuietBackend(CrafterBackend):
    """Crafter under another name whose spec names no threats (both shipped backends name some)."""

    spec = dataclasses.replace(CrafterBackend.spec, name="quiet", threats=())


def request(**interrupt: int | bool) -> env_pb2.CreateSessionRequest:
    return env_pb2.CreateSessionRequest(plan=["chop"], plan_interrupt=common_pb2.PlanInterrupt(**interrupt))


def test_a_threat_distance_on_a_backend_without_threats_is_refused_and_says_what_to_use() -> None:
    with pytest.raises(InvalidArgument, match=r"plan_interrupt.threat_within: quiet names no threats \(Describe's "
                                              r"threats is empty\); use plan_interrupt.damage"):
        plan_interrupt(QuietBackend(), request(threat_within=3), EnvServerSettings())
    assert plan_interrupt(QuietBackend(), request(damage=True), EnvServerSettings()).damage  # hurt still works
    assert plan_interrupt(CrafterBackend(), request(threat_within=3), EnvServerSettings()).threat_within == 3
