"""The critic's DescribeCritic: the one owner of the success threshold and of a Judge request's limits."""

from __future__ import annotations

from rlgpt.v1 import critic_pb2
from services.critic.servicer import CriticServicer
from services.critic.settings import CriticSettings


def test_describe_critic_serves_its_settings() -> None:
    settings = CriticSettings(use_llm=False, success_threshold=0.7, max_frames=3, max_rollouts=9)
    served = CriticServicer(settings).DescribeCritic(critic_pb2.DescribeCriticRequest(), None)
    assert round(served.success_threshold, 5) == 0.7
    assert (served.max_frames, served.max_rollouts) == (3, 9)
    assert (served.max_code_bytes, served.max_frame_bytes, served.max_curve_points) == (
        settings.max_code_bytes, settings.max_frame_bytes, settings.max_curve_points)
