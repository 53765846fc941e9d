"""The reward term vocabulary has one description (rlgpt.reward_kinds): the env server accepts those kinds, the
fast agent's prompt describes each, and targets are kept only for the kinds that take one."""

from __future__ import annotations

from rlgpt.reward_kinds import REWARD_KINDS, offered
from rlgpt.v1 import env_pb2
from services.planner.agents.texts import reward_kinds_text


def test_the_prompt_describes_each_listed_kind_and_names_unknown_ones() -> None:
    describe = env_pb2.DescribeResponse(reward_kinds=["step", "inventory_gain", "stage", "sparkle"])
    assert reward_kinds_text(describe).splitlines() == [
        f"- step: {REWARD_KINDS['step'].doc}", f"- inventory_gain: {REWARD_KINDS['inventory_gain'].doc}",
        "- sparkle"]
    assert reward_kinds_text(env_pb2.DescribeResponse()) == "(none listed)"


def test_the_agents_are_not_offered_a_kind_their_configs_cannot_pay() -> None:
    from services.planner.schemas import rl_schema

    describe = env_pb2.DescribeResponse(reward_kinds=list(REWARD_KINDS), actions=["noop"])
    assert "stage" in REWARD_KINDS and "stage" not in offered(REWARD_KINDS)  # a kept plan's own term
    assert "- stage:" not in reward_kinds_text(describe)
    schema = rl_schema(describe, ()).model_json_schema()
    assert "stage" not in str(schema) and "success" in str(schema)
