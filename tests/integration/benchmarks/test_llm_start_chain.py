"""bench-llm tests a skill where the planner would: from what the rules' chain before its sub-task leaves."""

from __future__ import annotations

from benchmarks.bench_llm import chain_start
from rlgpt.v1 import common_pb2, env_pb2


def start_of(describe: env_pb2.DescribeResponse, achievement: str) -> dict[str, int]:
    task = common_pb2.TaskSpec(name=achievement, success=[common_pb2.Condition(achievement=achievement)])
    return {c.item: c.count for c in chain_start(task, describe)}


def test_a_subtask_starts_with_what_the_chain_before_it_leaves(env_server) -> None:
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    assert start_of(describe, "collect_wood") == {}
    stone_sword = start_of(describe, "make_stone_sword")
    # The chain makes a wood pickaxe to collect stone: a skill that collects its own stone can.
    assert stone_sword["wood_pickaxe"] == 1 and stone_sword["stone"] >= 1 and stone_sword["wood"] >= 1
    assert "stone" not in start_of(describe, "collect_stone")


