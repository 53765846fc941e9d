"""bench-diamond-rules: each rule's choices, one rule played on a real env server, the section from results, and
its command line (a tag keeps another answer's run apart)."""

from __future__ import annotations

from benchmarks.crafter.diamond import AGENT_MACRO_PREFIX, PLAN_RUN, SKILL_PREFIX, load_plan
from benchmarks.crafter.diamond_rules import (
    ANSWER,
    Tools,
    load_answer,
    play_rule,
    rules_config,
)
from rlgpt.v1 import env_pb2


def test_a_rule_plays_each_world_once_with_the_answers_macros(env_server) -> None:
    plan, answer = load_plan(PLAN_RUN), load_answer(ANSWER)
    config = rules_config(plan, answer, env_server.stub.Describe(env_pb2.DescribeRequest()))
    # The answer's own K and interrupts, and its macro actions by their registered names.
    assert config.skill_max_steps == answer["skill_max_steps"]
    assert config.plan_interrupt.threat_within == answer["hand_back_within"] and config.plan_interrupt.damage
    assert sorted(config.skills) == sorted(AGENT_MACRO_PREFIX + m["name"] for m in answer["macro_actions"])
    for name, code, _ in plan.steps:
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=SKILL_PREFIX + name, code=code, replace=True))
    for macro in answer["macro_actions"]:
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(
            name=AGENT_MACRO_PREFIX + macro["name"], code=macro["code"], replace=True))
    result = play_rule(f"127.0.0.1:{env_server.port}", config, "shelter+fight", Tools(), 2, 5)
    assert result["episodes"] == 2 and len(result["ends"]) == 2
    assert result["frames"] == sum(e["steps"] for e in result["ends"]) > 0
    assert [link["name"] for link in result["links"]] == [SKILL_PREFIX + name for name, _, _ in plan.steps]


