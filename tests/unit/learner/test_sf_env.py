"""The learner's Sample Factory env over a real env server: one session per rollout worker, its splits as
groups of envs stepped with one call each, CHW images, per-worker worlds, stats, a failing skill, a lost server."""

from __future__ import annotations

import pytest

from rlgpt.v1 import common_pb2, learner_pb2
from services.learner.rl_config import worker_splits
from services.learner.sf_env import env_server_for


@pytest.mark.parametrize(("envs", "device", "splits"), [
    (4, "cuda", 2), (3, "cuda", 1), (1, "cuda", 1), (2, "cuda", 2), (4, "cpu", 1), (16, "cpu", 1)])
def test_double_buffering_on_a_gpu_with_an_even_number_of_envs(envs: int, device: str, splits: int) -> None:
    assert worker_splits(envs, device) == splits


def test_workers_take_the_jobs_env_servers_in_turn() -> None:
    doc = {"env_server": "a:1", "env_servers": ["a:1", "b:2"]}
    assert [env_server_for(doc, w) for w in range(4)] == ["a:1", "b:2", "a:1", "b:2"]
    assert env_server_for({"env_server": "a:1"}, 3) == "a:1"


def test_a_jobs_sessions_ask_for_its_config_as_the_env_server_reads_it() -> None:
    from services.learner.sf_env import session_request

    wood = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=2))
    config = learner_pb2.RLConfig(primitive_actions=["noop"], skills=["chop"], skill_max_steps=8, episode_length=50,
                                  observe=["status", "inventory/wood"],
                                  plan=[learner_pb2.PlanStep(skill="chop", success=[wood])])
    request = session_request(config, 11, num_envs=3, record=True)
    assert (request.seed, request.num_envs, request.skill_max_steps, request.episode_length) == (11, 3, 8, 50)
    assert list(request.observe) == ["status", "inventory/wood"] and list(request.plan) == ["chop"]
    assert list(request.stages[0].success) == [wood] and request.record_trajectories


def test_a_jobs_sessions_start_behind_its_prefix_and_animate_when_asked() -> None:
    from services.learner.sf_env import session_request

    step = common_pb2.PrefixStep(skill="chop", success=[common_pb2.Condition(achievement="collect_wood")],
                                 max_frames=90)
    config = learner_pb2.RLConfig(task=common_pb2.TaskSpec(name="place_table"), prefix=[step])
    assert list(session_request(config, 1).prefix) == [step] and session_request(config, 1).animate == 0
    assert session_request(config, 1, record=True, animate=2).animate == 2


def test_a_jobs_sessions_carry_its_chains_guards() -> None:
    from services.learner.sf_env import session_request

    guard = common_pb2.Guard(skill="drink_up", when=[common_pb2.Threshold(label="status/drink", value=3)],
                             max_frames=80)
    config = learner_pb2.RLConfig(task=common_pb2.TaskSpec(name="place_table"), guards=[guard])
    assert list(session_request(config, 1).guards) == [guard]
    assert not session_request(learner_pb2.RLConfig(), 1).guards
