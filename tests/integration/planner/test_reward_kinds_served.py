"""The reward term vocabulary has one description (rlgpt.reward_kinds): the env server accepts those kinds, the
fast agent's prompt describes each, and targets are kept only for the kinds that take one."""

from __future__ import annotations

from rlgpt.reward_kinds import REWARD_KINDS, TARGETED_KINDS, takes_target
from rlgpt.v1 import env_pb2


def test_the_env_server_accepts_exactly_the_described_kinds(env_server) -> None:
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    assert list(describe.reward_kinds) == list(REWARD_KINDS)
    assert {"achievement", "inventory_gain"} == TARGETED_KINDS
    assert takes_target("inventory_gain") and not takes_target("step") and not takes_target("unheard_of")


