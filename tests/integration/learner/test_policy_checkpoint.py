"""A loaded policy's actions: sampled from its distribution, or its most probable one when greedy."""

import torch

from services.learner.policy import Policy


def test_a_checkpoint_trained_on_other_shapes_is_refused_with_what_to_do(tmp_path) -> None:
    import gymnasium as gym
    import pytest
    from sample_factory.model.actor_critic import create_actor_critic

    from rlgpt.errors import FailedPrecondition
    from rlgpt.v1 import env_pb2, learner_pb2
    from services.learner.jobs import write_job_config
    from services.learner.spaces import observation_space
    from services.learner.train import parse_cfg, register_components, sf_argv

    config = learner_pb2.RLConfig(name="old", primitive_actions=["noop", "do"])
    job_dir = tmp_path / "job-old"
    job_dir.mkdir()
    write_job_config(job_dir, config, {})
    register_components()
    spaces = observation_space((64, 64, 3), (20,), 10.0)
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


