"""A skill remembers what its episode showed before it started, over a real gRPC channel on a real Crafter world:
the map an earlier skill's walk revealed is in a later skill's `agent` memory; a new episode starts with none."""

from __future__ import annotations

import pytest

from rlgpt.v1 import env_pb2

pytestmark = pytest.mark.usefixtures("no_leftover_sessions")

WALK_LEFT = '''
def skill(agent):
    for _ in range(12):
        yield "move_left"
'''
# Says what it remembers 8 columns right of the player (out of view: the view reaches 4) by failing on purpose.
RECALL = '''
def skill(agent):
    x, y = agent.position
    raise ValueError("remembered " + str(agent.at(x + 8, y)) + " at " + str(x + 8) + "," + str(y))
    yield "noop"
'''


def test_a_skill_starts_with_the_map_its_episode_showed_before_it(env_server) -> None:
    stub = env_server.stub
    for name, code in (("memory_walk_left", WALK_LEFT), ("memory_recall", RECALL)):
        stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))
    session = stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=5, skills=["memory_walk_left", "memory_recall"], skill_max_steps=20))
    walk, recall = len(session.actions) - 2, len(session.actions) - 1
    def recalled() -> str:
        step = stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=[recall]))
        return step.infos[0].skill_error.message

    first = recalled()  # at the start, 8 columns right was never in view
    assert first.startswith("remembered None at "), first
    stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=[walk]))
    said = recalled()
    x, y = (int(v) for v in said.rsplit(" at ", 1)[1].split(","))
    world = env_server.servicer.sessions.get(session.session_id).slots[0].env._env._world  # the truth
    assert said.startswith(f"remembered {world[(x, y)][0]} at "), said  # seen by the walk, a skill before this one
    stub.Reset(env_pb2.ResetRequest(session_id=session.session_id))
    assert recalled().startswith("remembered None at ")  # a new episode remembers nothing yet
