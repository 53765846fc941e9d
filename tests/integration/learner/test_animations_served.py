"""Evaluate's animations (EvaluateRequest.animate) through the real learner and env server: GIFs of the first
successful and the first failed episodes of the session's wood policy (tests/integration/conftest.py), evaluated
alone and as a chain's link, none unasked; an animate above the env server's limit is refused."""

from __future__ import annotations

import io

import grpc
import PIL.Image
import pytest

from rlgpt.v1 import common_pb2, env_pb2, learner_pb2

pytestmark = pytest.mark.timeout(300)
WOOD = common_pb2.Condition(achievement="collect_wood")


def assert_animated(reply: learner_pb2.EvaluateResponse) -> None:
    """One GIF of a success where an episode succeeded, one of a failure where one failed; none besides."""
    animated = [e for e in reply.episodes if e.animation]
    assert sorted(e.success for e in animated) == sorted({e.success for e in reply.episodes})
    for episode in animated:
        gif = PIL.Image.open(io.BytesIO(episode.animation))
        assert gif.format == "GIF" and gif.n_frames > 1


def test_a_policy_and_a_chain_evaluated_with_animations(learner, wood_job) -> None:
    job_id, _ = wood_job
    ask = {"episodes": 3, "seed": 1, "episode_length": 100}
    assert_animated(learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, animate=1, **ask), timeout=240))
    chain = [learner_pb2.ChainLink(name="wood", job_id=job_id, success=[WOOD], max_frames=100)]
    assert_animated(learner.stub.Evaluate(learner_pb2.EvaluateRequest(
        chain=chain, task=common_pb2.TaskSpec(name="collect_wood"), animate=1, **ask), timeout=240))
    plain = learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, **ask), timeout=240)
    assert not any(e.animation for e in plain.episodes)


def test_more_animations_than_the_env_server_makes_are_refused(learner, wood_job, env_server) -> None:
    limit = env_server.stub.Describe(env_pb2.DescribeRequest()).limits.max_animations
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.Evaluate(learner_pb2.EvaluateRequest(job_id=wood_job[0], episodes=1, animate=limit + 1),
                              timeout=60)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"animate={limit + 1}: must be in 0..{limit}, the env server's max_animations" in info.value.details()
