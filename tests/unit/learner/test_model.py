"""The policy's encoder divides the observation vector by the scale the env server serves (ObservationField.scale),
carried by the observation space it is built for, across the pickling that hands Sample Factory's spaces between
processes."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import torch

from services.learner.model import ImageVectorEncoder
from services.learner.spaces import VectorBox, observation_space


def test_the_space_carries_the_vectors_scale_through_pickling() -> None:
    space = pickle.loads(pickle.dumps(observation_space((64, 64, 3), (5,), 10.0)))
    assert isinstance(space["vector"], VectorBox) and space["vector"].scale == 10.0
    assert space["image"].shape == (3, 64, 64) and space["vector"].shape == (5,)


def test_the_encoder_divides_the_vector_by_the_served_scale() -> None:
    torch.manual_seed(0)
    cfg = SimpleNamespace(nonlinearity="elu")
    scaled = ImageVectorEncoder(cfg, observation_space((64, 64, 3), (5,), 10.0))
    unscaled = ImageVectorEncoder(cfg, observation_space((64, 64, 3), (5,), 0.0))  # 0: not scaled
    unscaled.load_state_dict(scaled.state_dict())  # same weights: only the scale differs
    image = torch.zeros(1, 3, 64, 64, dtype=torch.uint8)
    vector = torch.full((1, 5), 9.0)
    with torch.no_grad():
        assert torch.allclose(scaled({"image": image, "vector": vector}),
                              unscaled({"image": image, "vector": vector / 10.0}))
