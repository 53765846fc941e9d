"""The agent's recipe helpers answer from the world's rules, in the agent and through a real sandbox worker."""

from __future__ import annotations


def test_the_rules_reach_skills_in_the_sandbox(env_server) -> None:
    from rlgpt.v1 import common_pb2, env_pb2

    code = ('def skill(agent):\n'
            '    wood = agent.needs("table")["uses"]["wood"]\n'
            '    for _ in range(wood):\n'
            '        yield "noop"\n'
            '    if any("2 more wood" in gap for gap in agent.missing("place_table")):\n'
            '        yield "noop"\n')
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(
        name="count_rules", description="counts the rules", code=code, replace=True))
    result = env_server.stub.RunSkill(env_pb2.RunSkillRequest(
        skill="count_rules", episodes=1, max_steps=50, task=common_pb2.TaskSpec(name="collect_wood")))
    # 2 frames for the table's 2 wood, 1 more because the player holds no wood yet.
    assert result.episodes[0].steps == 3
    assert not result.episodes[0].HasField("error"), result.episodes[0].error
