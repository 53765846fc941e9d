"""Encoder for the env server's dict observation: a conv net on the image, an MLP on the vector."""

from __future__ import annotations

from typing import Any

import torch
from sample_factory.algo.utils.torch_utils import calc_num_elements
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

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        image = obs_dict["image"].float() / 255.0  # uint8 reaches the model unnormalised (normalize_input=False)
        vector = obs_dict["vector"].float() / 10.0  # counts and status are 0..9 in Crafter
        return self.head(torch.cat([self.conv(image), self.vector(vector)], dim=1))

    def get_out_size(self) -> int:
        return 256


def make_encoder(cfg: Any, obs_space: Any) -> Encoder:
    return ImageVectorEncoder(cfg, obs_space)
