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
