"""Animations of episodes over a real gRPC channel on real Crafter worlds: RunSkill and sessions asked to animate
attach a GIF Pillow reads to their first successful and first failed episodes (at most the server's frames), and
to no other."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from rlgpt.v1 import common_pb2, env_pb2

pytestmark = pytest.mark.usefixtures("no_leftover_sessions")

WOOD_IF_SEEN = '''
def skill(agent):
    if not agent.sees("tree"):
        while True:
            yield agent.explore()
    while agent.inventory["wood"] < 1:
        action = agent.step_to("tree")
        yield action if action is not None else "do"
'''
"""Collects wood where a tree is in sight at the start; elsewhere it only explores (seed 3: the third world)."""
WOOD_TASK = common_pb2.TaskSpec(name="wood", terminate_on_success=True, success=[
    common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=1))])


def frame_count(gif: bytes) -> int:
    image = Image.open(io.BytesIO(gif))
    assert image.format == "GIF"
    return image.n_frames


def test_run_skill_animates_its_first_success_and_its_first_failure(env_server) -> None:
    stub = env_server.stub
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="wood_if_seen", code=WOOD_IF_SEEN, replace=True))
    limit = stub.Describe(env_pb2.DescribeRequest()).limits.max_animation_frames
    r = stub.RunSkill(env_pb2.RunSkillRequest(skill="wood_if_seen", task=WOOD_TASK, episodes=4, max_steps=250, seed=3,
                                              animate=1))
    episodes = list(r.episodes)
    assert [e.success for e in episodes] == [True, True, False, True]
    assert [bool(e.animation) for e in episodes] == [True, False, True, False]
    assert frame_count(episodes[0].animation) == episodes[0].steps + 1  # the reset's observation and every frame
    assert episodes[2].steps == 250 and 1 < frame_count(episodes[2].animation) <= limit
    plain = stub.RunSkill(env_pb2.RunSkillRequest(skill="wood_if_seen", task=WOOD_TASK, episodes=1, max_steps=20,
                                                  seed=3))
    assert not plain.episodes[0].animation


def test_a_session_animates_its_first_episodes_of_each_kind_only(env_server) -> None:
    stub = env_server.stub
    s = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2, seed=3, episode_length=3, autoreset=True,
                                                        record_trajectories=True, animate=1))
    animations = []
    for _ in range(6):  # two episodes per env, each of 3 frames; an open-ended task fails every one
        r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[0, 0]))
        animations += [info.episode.animation for info in r.infos if info.HasField("episode")]
    assert len(animations) == 4 and animations[0] and not any(animations[1:])
    assert 1 <= frame_count(animations[0]) <= 4  # Pillow merges identical frames
