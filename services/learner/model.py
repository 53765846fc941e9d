"""The policy's network: an encoder for the env server's dict observation (a conv net on the image, an MLP on the
vector divided by the scale the env server gives it, ``services.learner.spaces``), and Sample Factory's
actor-critic around it, its plan action given a starting probability when asked."""

from __future__ import annotations

import math
from typing import Any

import torch
from sample_factory.algo.utils.torch_utils import calc_num_elements
from sample_factory.model.actor_critic import ActorCritic, default_make_actor_critic_func
from sample_factory.model.encoder import Encoder
from sample_factory.model.model_utils import nonlinearity
from torch import nn


class ImageVectorEncoder(Encoder):
    """Nature-CNN-sized conv stack for 64x64 frames plus a small MLP for status and inventory."""

    def __init__(self, cfg: Any, obs_space: Any):
        super().__init__(cfg)
        channels = obs_space["image"].shape[0]
        self.conv = nn.Sequential(
            nn.Conv2d(channels, 32, 8, stride=4), nonlinearity(cfg),
            nn.Conv2d(32, 64, 4, stride=2), nonlinearity(cfg),
            nn.Conv2d(64, 64, 3, stride=1), nonlinearity(cfg),
            nn.Flatten(),
        )
        self.conv_out = calc_num_elements(self.conv, obs_space["image"].shape)
        self.vector = nn.Sequential(nn.Linear(obs_space["vector"].shape[0], 64), nonlinearity(cfg))
        self.head = nn.Sequential(nn.Linear(self.conv_out + 64, 256), nonlinearity(cfg))
        # The env server's scale for its vector (Describe's ObservationField.scale, carried by the space).
        self.vector_scale = obs_space["vector"].scale or 1.0

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        image = obs_dict["image"].float() / 255.0  # uint8 reaches the model unnormalised (normalize_input=False)
        vector = obs_dict["vector"].float() / self.vector_scale
        return self.head(torch.cat([self.conv(image), self.vector(vector)], dim=1))

    def get_out_size(self) -> int:
        return 256


def make_encoder(cfg: Any, obs_space: Any) -> Encoder:
    return ImageVectorEncoder(cfg, obs_space)


def plan_prior_bias(actions: int, prior: float) -> float:
    """The logit bias that gives the last of ``actions`` actions probability ``prior`` when the other logits are
    equal (softmax: p = e^b / (e^b + n - 1))."""
    return math.log(prior * (actions - 1) / (1 - prior))


def make_actor_critic(cfg: Any, obs_space: Any, action_space: Any) -> ActorCritic:
    """Sample Factory's actor-critic; with ``--rlgpt_plan_prior`` the action head's bias starts the policy on the
    plan action (the last action, RLConfig.plan) with that probability. The head's weights are scaled down as well
    (the small policy-output init of Andrychowicz et al. 2021) so the probability holds on any observation, not only
    on average over a random init. A checkpoint loaded later replaces both."""
    model = default_make_actor_critic_func(cfg, obs_space, action_space)
    prior = float(getattr(cfg, "rlgpt_plan_prior", 0.0) or 0.0)
    if prior > 0 and getattr(action_space, "n", 0) > 1:
        head = model.action_parameterization.distribution_linear
        with torch.no_grad():
            head.weight.mul_(0.01)
            head.bias.zero_()
            head.bias[-1] = plan_prior_bias(int(action_space.n), prior)
    return model
