"""A job behind a chain prefix (RLConfig.prefix) through the real env server and learner: the env server collects
wood, then idles 20 frames, after every reset; the policy acts from there. Its training's vector env counts the
prefix's frames in the episode they start, a real Sample Factory training counts them in JobProgress.env_frames,
and the job's evaluation plays episodes that start where the prefix ended (the wood it collected)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import grpc
import numpy as np
import pytest
from learner_support import register_skills, watch_until_done

from rlgpt.v1 import common_pb2, env_pb2, learner_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.learner.jobs import write_job_config
from services.learner.sf_env import make_sf_env

pytestmark = pytest.mark.timeout(600)
IDLE = "def skill(agent):\n    yield 'noop'\n"
IDLE_FRAMES = 20
WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=1))
PREFIX = [common_pb2.PrefixStep(skill="prefix_wood", success=[WOOD], max_frames=200),
          # Never done: it always takes its 20 frames, so every episode's prefix is longer than 20.
          common_pb2.PrefixStep(skill="prefix_idle", success=[common_pb2.Condition(achievement="collect_diamond")],
                                max_frames=IDLE_FRAMES)]
EPISODE = 20
"""The policy's own frames per episode (its episode_length)."""
MOVES = ["noop", "move_left", "move_right", "move_up", "move_down", "do"]  # nothing that spends wood


@pytest.fixture(scope="module", autouse=True)
def skills(env_server) -> None:
    register_skills(env_server, {"prefix_wood": COLLECT_WOOD, "prefix_idle": IDLE})


def config(**fields) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(**{
        "name": "behind_wood", "backend": "crafter", "task": common_pb2.TaskSpec(name="collect_sapling"),
        "primitive_actions": MOVES, "episode_length": EPISODE, "prefix": PREFIX, "num_workers": 2,
        "envs_per_worker": 2, "seed": 5, "reward_terms": [common_pb2.RewardTerm(kind="success", weight=1.0)],
        **fields})


def wood_entry(env_server) -> int:
    vector = next(f for f in env_server.stub.Describe(env_pb2.DescribeRequest()).observation if f.name == "vector")
    return list(vector.labels).index("inventory/wood")


def test_the_vector_env_counts_each_episodes_prefix_in_its_frames(env_server, tmp_path: Path) -> None:
    write_job_config(tmp_path, config(), {"env_server": env_server.target, "record_episodes": True})
    cfg = types.SimpleNamespace(rlgpt_job_dir=str(tmp_path), worker_num_splits=1)
    env = make_sf_env("rlgpt", cfg, types.SimpleNamespace(worker_index=0, vector_index=0, env_id=0))
    try:
        first, _ = env.reset()
        assert (first["vector"][:, wood_entry(env_server)] >= 1).all()  # the policy starts with the prefix's wood
        prefix = env._session.first_prefix_frames.tolist()
        assert all(frames > IDLE_FRAMES for frames in prefix)
        for _ in range(EPISODE):
            *_, truncated, info = env.step(np.zeros(2, np.int64))
        assert truncated.all()  # the time limit counts the policy's own frames only
        assert info["episode_extra_stats"]["frames"].tolist() == [p + EPISODE for p in prefix]
        # The next episodes' prefixes (run by the autoreset) are theirs, not the ended episodes'.
        assert (env._sums["frames"] > IDLE_FRAMES).all()
    finally:
        env.close()
    logged = [json.loads(line) for line in (tmp_path / "episodes" / "worker0-0.jsonl").read_text().splitlines()]
    assert [e["frames"] for e in logged] == [p + EPISODE for p in prefix]


def test_a_job_behind_a_prefix_trains_and_is_evaluated_where_the_prefix_ends(learner) -> None:
    job_id = learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=config(env_frames=1500))).job_id
    final = watch_until_done(learner, job_id)[-1]
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED, final.message
    # Every finished episode took its prefix (> 20 frames) and at most 20 of its own: without the prefix's frames
    # the count would be at most 20 per episode plus the 4 envs' unfinished ones (80 frames: below this bound once
    # 4 episodes ended).
    assert final.episodes >= 4 and final.env_frames >= final.episodes * (EPISODE + IDLE_FRAMES + 1)
    reply = learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=3, seed=1), timeout=240)
    assert len(reply.episodes) == 3
    for episode in reply.episodes:  # what the prefix made is in every evaluated episode
        assert "collect_wood" in episode.achievements
        assert {i.item: i.count for i in episode.final_inventory}.get("wood", 0) >= 1


def test_a_prefix_the_env_server_cannot_run_is_refused(learner) -> None:
    bad = common_pb2.PrefixStep(skill="prefix_wood", success=[WOOD], max_frames=0)
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=config(env_frames=100, prefix=[bad])))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "prefix[0].max_frames=0: must be in 1.." in info.value.details()
