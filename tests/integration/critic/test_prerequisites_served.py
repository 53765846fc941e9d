"""Missing prerequisites, read from world rules: hand-made rules, then the rules a real env server serves."""

from __future__ import annotations

import pytest
from critic_samples import episode, has, request

from rlgpt.v1 import common_pb2, critic_pb2, env_pb2
from services.critic.checks import deterministic_checks
from services.critic.prerequisites import prerequisite_words, required_tools

# A small tech tree: wood by hand, a table from wood, a pickaxe from wood near a table, stone with the pickaxe.
# --- with the rules a real env server serves ------------------------------------------------------------------


@pytest.fixture(scope="module")
def rules(env_server) -> common_pb2.WorldRules:
    """The game's rules as a real env server serves them (the planner passes them on in JudgeRequest.rules)."""
    return env_server.stub.Describe(env_pb2.DescribeRequest()).rules


def test_missing_prerequisite_goes_to_the_slow_agent(rules) -> None:
    stone = [common_pb2.Condition(achievement="collect_stone")]
    no_pickaxe = episode(final_inventory=[common_pb2.ItemCount(item="wood", count=3)], achievements=["collect_wood"])
    found = deterministic_checks(request(subtask="get_stone", success=stone, rollouts=[no_pickaxe] * 2, rules=rules))
    assert has(found.findings, "missing_prerequisite wood_pickaxe")
    assert found.target == critic_pb2.TARGET_SLOW and "wood_pickaxe" in found.suggestion
    held = episode(final_inventory=[common_pb2.ItemCount(item="wood_pickaxe", count=1)])
    assert deterministic_checks(request(success=stone, rollouts=[held], rules=rules)).target == critic_pb2.TARGET_FAST
    made = episode(achievements=["make_wood_pickaxe"])  # made (and maybe lost) during the episode: it was held
    assert deterministic_checks(request(success=stone, rollouts=[made], rules=rules)).target == critic_pb2.TARGET_FAST
    said = common_pb2.SkillError(type="RuntimeError", message="this needs a stone_pickaxe", line=2)
    found = deterministic_checks(request(rollouts=[episode(error=said)], rules=rules))
    assert has(found.findings, "missing_prerequisite stone_pickaxe")
    assert found.target == critic_pb2.TARGET_SLOW  # before the exception's FAST


def test_prerequisites_come_from_the_rules_in_the_request(rules) -> None:
    furnace = [common_pb2.Condition(achievement="place_furnace")]
    idle = episode(final_inventory=[common_pb2.ItemCount(item="wood", count=5)])
    # The rules: a furnace uses stone, stone needs a wood_pickaxe held.
    [place] = [r for r in rules.place if r.achievement == "place_furnace"]
    [stone_rule] = [r for r in rules.collect if r.material == "stone"]
    assert [u.item for u in place.uses] == ["stone"] and [h.item for h in stone_rule.requires] == ["wood_pickaxe"]
    found = deterministic_checks(request(success=furnace, rollouts=[idle] * 2, rules=rules))
    assert has(found.findings, "missing_prerequisite wood_pickaxe") and found.target == critic_pb2.TARGET_SLOW
    # Started with the stone it uses: no pickaxe needed, so the failure is the code's.
    enough = [common_pb2.ItemCount(item="stone", count=place.uses[0].count)]
    found = deterministic_checks(request(success=furnace, rollouts=[idle] * 2, rules=rules, start_inventory=enough))
    assert not [f for f in found.findings if f.startswith("missing_prerequisite")]
    assert found.target == critic_pb2.TARGET_FAST
    # Without rules nothing is assumed: no hand-typed tech tree.
    bare = deterministic_checks(request(success=furnace, rollouts=[idle] * 2))
    assert not [f for f in bare.findings if f.startswith("missing_prerequisite")]
    # Names a text can lack are the rules' tools, made and placed things, nearby stations.
    words = prerequisite_words(rules)
    assert {"wood_pickaxe", "table", "furnace", "iron_sword"} <= set(words) and "tree" not in words
    assert required_tools(rules, "make_iron_pickaxe", {}) == ["wood_pickaxe", "stone_pickaxe"]

