"""A loaded policy's actions: sampled from its distribution, or its most probable one when greedy."""

import numpy as np
import torch

from services.learner.policy import Policy


class Logits:
    """Stands in for the actor-critic: the same logits for every observation (action 2 most probable)."""

    def __call__(self, obs, rnn_states):
        return {"action_logits": torch.tensor([[0.0, 1.0, 1.5, 0.5]]).repeat(len(obs["image"]), 1)}


def test_greedy_takes_the_most_probable_action_and_sampling_does_not_always() -> None:
    policy = Policy(Logits())
    images, vectors = np.zeros((64, 8, 8, 3), np.uint8), np.zeros((64, 2), np.float32)
    assert policy.act(images, vectors, torch.Generator().manual_seed(0), greedy=True) == [2] * 64
    sampled = policy.act(images, vectors, torch.Generator().manual_seed(0))
    assert set(sampled) > {2}  # the others have probability too


def test_a_checkpoint_trained_on_other_shapes_is_refused_with_what_to_do(tmp_path) -> None:
    import gymnasium as gym
    import pytest
    from sample_factory.model.actor_critic import create_actor_critic

    from rlgpt.errors import FailedPrecondition
    from rlgpt.v1 import env_pb2, learner_pb2
    from services.learner.jobs import write_job_config
    from services.learner.train import parse_cfg, register_components, sf_argv

    config = learner_pb2.RLConfig(name="old", primitive_actions=["noop", "do"])
    job_dir = tmp_path / "job-old"
    job_dir.mkdir()
    write_job_config(job_dir, config, {})
    register_components()
    spaces = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (3, 64, 64), np.uint8),
                              "vector": gym.spaces.Box(-1e6, 1e6, (20,), np.float32)})
    model = create_actor_critic(parse_cfg(sf_argv(config, job_dir, "cpu"), evaluation=True), spaces,
                                gym.spaces.Discrete(2))
    checkpoint = job_dir / "checkpoint_old.pth"
    torch.save({"model": model.state_dict()}, checkpoint)

    def fields(vector: int) -> list[env_pb2.ObservationField]:
        return [env_pb2.ObservationField(name="image", shape=[64, 64, 3]),
                env_pb2.ObservationField(name="vector", shape=[vector])]

    assert Policy.load(job_dir, checkpoint, config, fields(20), 2).model is not None  # the shapes it trained on
    with pytest.raises(FailedPrecondition, match=r"checkpoint_old.pth of job job-old does not fit what the env "
                                                 r"serves now \(a vector of 23 entries, 2 actions\).*train the job"):
        Policy.load(job_dir, checkpoint, config, fields(23), 2)


def test_a_resume_checks_the_latest_checkpoint_against_what_the_env_serves(tmp_path) -> None:
    import pytest
    import torch

    from rlgpt.errors import FailedPrecondition
    from services.learner.policy import ACTION_WEIGHT, VECTOR_WEIGHT, check_resumable

    job_dir = tmp_path / "job-7"
    check_resumable(job_dir, 23, 9)  # nothing saved yet: a resume starts afresh, nothing to refuse
    saved = job_dir / "sf" / "job-7" / "checkpoint_p0"
    saved.mkdir(parents=True)
    torch.save({"model": {VECTOR_WEIGHT: torch.zeros(64, 20), ACTION_WEIGHT: torch.zeros(9, 256)}},
               saved / "checkpoint_000000001_100.pth")
    check_resumable(job_dir, 20, 9)
    with pytest.raises(FailedPrecondition, match=r"checkpoint_000000001_100.pth of job job-7 does not fit .*a vector "
                                                 r"of 23 entries, 9 actions.*The checkpoint's: a vector of 20"):
        check_resumable(job_dir, 23, 9)
    with pytest.raises(FailedPrecondition, match="The checkpoint's: a vector of 20 entries, 9 actions"):
        check_resumable(job_dir, 20, 10)
