"""A session's prefix over a real gRPC channel on real Crafter worlds: the env server runs the chain's earlier
links after every reset, the client's first observation is the prefix's last, the prefix's frames are reported,
count in the episode's steps but not toward its length and earn nothing, and bad prefixes are refused."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from env_server_support import rpc_error

from rlgpt.tensors import from_tensor
from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.skills.reference import PLACE_TABLE

pytestmark = pytest.mark.usefixtures("no_leftover_sessions")

WOOD_1 = '''
def skill(agent):
    while agent.inventory["wood"] < 1:
        action = agent.step_to("tree")
        yield action if action is not None else "do"
'''
HAS_WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=1))
HAS_TABLE = common_pb2.Condition(achievement="place_table")
WOOD_REWARD = common_pb2.RewardTerm(kind="inventory_gain", target="wood", weight=1.0)


@pytest.fixture(scope="module")
def chain(env_server) -> list[common_pb2.PrefixStep]:
    """The two links before a sub-task: one wood, then a table."""
    for name, code in (("prefix_wood", WOOD_1), ("prefix_table", PLACE_TABLE)):
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))
    return [common_pb2.PrefixStep(skill="prefix_wood", success=[HAS_WOOD], max_frames=300),
            common_pb2.PrefixStep(skill="prefix_table", success=[HAS_TABLE], max_frames=300)]


def observation(obs: env_pb2.Observations) -> tuple[np.ndarray, np.ndarray]:
    return from_tensor(obs.image)[0], from_tensor(obs.vector)[0]


def wood_held(session: env_pb2.CreateSessionResponse, obs: env_pb2.Observations) -> list[float]:
    """Per row of ``obs``, the wood the player holds (its vector's inventory/wood)."""
    labels = list(next(field for field in session.observation if field.name == "vector").labels)
    return from_tensor(obs.vector)[:, labels.index("inventory/wood")].tolist()


def test_a_sub_task_trained_behind_a_chain_prefix_starts_where_the_prefix_ends(env_server, chain) -> None:
    """Its first observation is the prefix's last: the same skills run as actions on the same world, in a session
    without a prefix, end in the same state after the same frames."""
    stub = env_server.stub
    behind = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, prefix=chain))
    alone = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, skills=["prefix_wood", "prefix_table"],
                                                            skill_max_steps=300))
    frames = 0
    for action in (len(alone.actions) - 2, len(alone.actions) - 1):
        last = stub.Step(env_pb2.StepRequest(session_id=alone.session_id, actions=[action]))
        assert last.infos[0].skill_finished and not last.terminated[0]
        frames += last.frames[0]
    assert list(last.infos[0].achievements) == ["place_table"]
    assert list(behind.observations.prefix_frames) == [frames] and frames > 2
    image, vector = observation(behind.observations)
    assert (image == observation(last.observations)[0]).all() and (vector == observation(last.observations)[1]).all()
    assert list(alone.observations.prefix_frames) == [0]  # no prefix: 0 per row
    assert not (image == observation(alone.observations)[0]).all()


def test_prefix_frames_count_in_the_steps_not_toward_the_length_earn_nothing_and_rerun_after_every_reset(
        env_server, chain) -> None:
    stub = env_server.stub
    s = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2, seed=3, prefix=chain[:1], episode_length=3,
                                                        autoreset=True, reward_terms=[WOOD_REWARD]))
    first = list(s.observations.prefix_frames)
    assert all(f > 0 for f in first) and s.episode_length == 3
    assert wood_held(s, s.observations) == [1, 1]  # each env starts where its prefix ended
    noop = list(s.actions).index("noop")
    for k in (1, 2):
        r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[noop, noop]))
        assert list(r.frames) == [1, 1] and not any(r.truncated) and list(r.rewards) == [0.0, 0.0]
        assert [info.episode_steps for info in r.infos] == [f + k for f in first]
        assert list(r.observations.prefix_frames) == [0, 0]
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[noop, noop]))  # the client's third frame
    assert all(r.truncated) and [info.end_reason for info in r.infos] == ["time_limit"] * 2
    assert [info.episode_steps for info in r.infos] == [f + 3 for f in first]
    again = list(r.observations.prefix_frames)  # the next worlds' prefixes ran in the same step
    assert all(info.was_reset for info in r.infos) and all(f > 0 for f in again)
    assert list(r.frames) == [1 + f for f in again] and list(r.rewards) == [0.0, 0.0]
    reset = stub.Reset(env_pb2.ResetRequest(session_id=s.session_id, env_indices=[1]))
    assert len(reset.observations.prefix_frames) == 1 and reset.observations.prefix_frames[0] > 0
    closed = stub.CloseSession(env_pb2.CloseSessionRequest(session_id=s.session_id))
    # The prefix's frames are env frames the session stepped, at its creation, its autoresets and its Resets.
    assert closed.total_frames == sum(first) + 6 + sum(again) + reset.observations.prefix_frames[0]


def test_a_recorded_episode_starts_its_text_after_the_prefix(env_server, chain) -> None:
    stub = env_server.stub
    s = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, prefix=chain[:1], episode_length=1,
                                                        record_trajectories=True, autoreset=True))
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[0]))
    episode = r.infos[0].episode
    prefix = s.observations.prefix_frames[0]
    assert episode.text.startswith(f"start after the prefix ({prefix} frames): ")
    assert episode.steps == prefix + 1 and episode.episode_return == 0.0
    assert "wood" in [item.item for item in episode.final_inventory] and not episode.HasField("error")


def test_a_failing_prefix_skill_ends_its_step_and_the_next_step_runs(env_server, chain) -> None:
    stub = env_server.stub
    code = "def skill(agent):\n    raise ValueError('no tree in sight')\n    yield 'noop'\n"
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="prefix_fails", code=code, replace=True))
    failing = common_pb2.PrefixStep(skill="prefix_fails", success=[HAS_TABLE], max_frames=50)
    s = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, prefix=[failing, chain[0]]))
    plain = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, prefix=chain[:1]))
    # The failed skill spent one frame (the server's noop), then the wood link ran from there.
    assert s.observations.prefix_frames[0] >= 2 and plain.observations.prefix_frames[0] >= 1
    assert wood_held(s, s.observations) == [1]


def test_a_skill_that_returns_early_starts_again_until_its_conditions_hold_or_its_frames_pass(env_server) -> None:
    stub = env_server.stub
    code = "def skill(agent):\n    yield agent.step_to('tree') or 'do'\n"  # one frame, then it returns
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="prefix_one_frame", code=code, replace=True))
    s = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, prefix=[common_pb2.PrefixStep(
        skill="prefix_one_frame", success=[HAS_WOOD], max_frames=300)]))
    assert wood_held(s, s.observations) == [1] and 1 < s.observations.prefix_frames[0] < 300
    never = common_pb2.Condition(achievement="collect_diamond")
    s = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, prefix=[common_pb2.PrefixStep(
        skill="prefix_one_frame", success=[never], max_frames=7)]))
    assert s.observations.prefix_frames[0] == 7  # its frames passed: the client acts from there


def test_bad_prefixes_and_animations_are_refused_with_what_to_change(env_server, chain) -> None:
    stub = env_server.stub
    limits = stub.Describe(env_pb2.DescribeRequest()).limits

    def refused(**fields) -> tuple[grpc.StatusCode, str]:
        return rpc_error(stub.CreateSession, env_pb2.CreateSessionRequest(num_envs=1, **fields))

    code, details = refused(prefix=[chain[0], common_pb2.PrefixStep(skill="no_such_link", success=[HAS_WOOD],
                                                                    max_frames=10)])
    assert code == grpc.StatusCode.NOT_FOUND and "prefix[1].skill: no skill named 'no_such_link'" in details
    code, details = refused(prefix=[common_pb2.PrefixStep(skill="prefix_wood", max_frames=10)])
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "prefix[0].success is empty" in details
    for frames in (0, limits.max_episode_length + 1):
        code, details = refused(prefix=[common_pb2.PrefixStep(skill="prefix_wood", success=[HAS_WOOD],
                                                              max_frames=frames)])
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert f"prefix[0].max_frames={frames} must be in 1..{limits.max_episode_length}" in details
    code, details = refused(prefix=[chain[0]] * (limits.max_stages + 1))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"prefix has {limits.max_stages + 1} entries; the limit is {limits.max_stages}" in details
    code, details = refused(animate=1)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "animate=1 needs record_trajectories" in details
    code, details = refused(animate=limits.max_animations + 1, record_trajectories=True)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"animate={limits.max_animations + 1} must be in 0..{limits.max_animations}" in details
    code, details = rpc_error(stub.RunSkill, env_pb2.RunSkillRequest(skill="prefix_wood", episodes=1, animate=-1))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "animate=-1 must be in 0.." in details


def test_a_skill_tested_behind_a_prefix_starts_where_the_chain_hands_over(env_server, chain) -> None:
    """RunSkill's test episodes run the chain's earlier links first: a skill that only waits one frame meets a
    condition the prefix met (wood held), which it never meets from a fresh start; the prefix's frames count in
    the episode's steps, the test's max_steps from where it hands over."""
    stub = env_server.stub
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="prefix_wait_once", replace=True,
                                                    code="def skill(agent):\n    yield 'noop'\n"))
    task = common_pb2.TaskSpec(name="hold_wood", success=[HAS_WOOD])
    behind = stub.RunSkill(env_pb2.RunSkillRequest(skill="prefix_wait_once", episodes=2, seed=3, max_steps=5,
                                                   task=task, prefix=chain[:1]))
    alone = stub.RunSkill(env_pb2.RunSkillRequest(skill="prefix_wait_once", episodes=2, seed=3, max_steps=5,
                                                  task=task))
    assert behind.success_rate == 1.0 and alone.success_rate == 0.0
    prefix = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2, seed=3, prefix=chain[:1]))
    assert [e.steps for e in behind.episodes] == [f + 1 for f in prefix.observations.prefix_frames]
    code, details = rpc_error(stub.RunSkill, env_pb2.RunSkillRequest(
        plan=["prefix_wood"], stages=[env_pb2.Stage(success=[HAS_WOOD])], episodes=1, prefix=chain[:1]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "give `prefix` with `skill`, not with `plan`" in details
    code, details = rpc_error(stub.RunSkill, env_pb2.RunSkillRequest(
        skill="prefix_wait_once", episodes=1, prefix=[common_pb2.PrefixStep(skill="prefix_wood", max_frames=10)]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "prefix[0].success is empty" in details
