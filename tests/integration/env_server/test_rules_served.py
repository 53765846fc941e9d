"""The served world rules against the installed game itself: every amount the rules state is what the game does."""

from __future__ import annotations

from rlgpt import world_rules
from services.env_server.backends.crafter_rules import crafter_rules


def test_describe_serves_the_rules_and_the_skill_api_states_them(env_server) -> None:
    from rlgpt.v1 import env_pb2

    describe = env_server.stub.Describe(env_pb2.DescribeRequest(backend="crafter"))
    assert describe.rules == crafter_rules()
    table = world_rules.achievement_rule(describe.rules, "place_table")
    assert f"place_table: uses {table.uses['wood']} wood" in describe.skill_api
    assert describe.rules.text in describe.skill_api
