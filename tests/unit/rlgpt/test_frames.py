"""Frames for the critic: PNG bytes any decoder reads back, and an even sample of an episode of any length."""

from __future__ import annotations

import io
import itertools

import numpy as np
import PIL.Image
import pytest

from rlgpt.frames import PNG_SIGNATURE, FrameSampler, even_indices, png_bytes


def test_png_bytes_decode_to_the_same_pixels() -> None:
    image = np.random.default_rng(0).integers(0, 256, (64, 48, 3), dtype=np.uint8)
    png = png_bytes(image)
    assert png.startswith(PNG_SIGNATURE)
    decoded = PIL.Image.open(io.BytesIO(png))
    assert decoded.format == "PNG" and decoded.mode == "RGB" and decoded.size == (48, 64)
    np.testing.assert_array_equal(np.asarray(decoded), image)


@pytest.mark.parametrize("image", [np.zeros((8, 8), np.uint8), np.zeros((8, 8, 4), np.uint8),
                                   np.zeros((8, 8, 3), np.float32)])
def test_png_bytes_refuses_what_is_not_an_rgb_image(image: np.ndarray) -> None:
    with pytest.raises(ValueError, match=r"expected a uint8 \[H, W, 3\] RGB image"):
        png_bytes(image)


def test_even_indices_keep_the_first_and_the_last() -> None:
    assert even_indices(10, 3) == [0, 4, 9]  # round(4.5) is 4: banker's rounding
    assert even_indices(2, 3) == [0, 1]
    assert even_indices(10, 1) == [9]
    assert even_indices(0, 3) == [] and even_indices(5, 0) == []


def frame(step: int) -> np.ndarray:
    return np.full((4, 4, 3), step % 256, np.uint8)


@pytest.mark.parametrize("length", [0, 1, 2, 5, 37, 1000, 4097])
def test_sampler_spreads_k_frames_over_an_episode_and_ends_on_its_last(length: int) -> None:
    sampler = FrameSampler(4)
    for step in range(length + 1):  # step 0: the observation after the reset
        sampler.add(step, frame(step))
    steps, pngs = sampler.sample()
    assert len(steps) == len(pngs) == min(4, length + 1)
    assert steps[0] == 0 and steps[-1] == length and steps == sorted(set(steps))
    for step, png in zip(steps, pngs, strict=True):
        assert np.asarray(PIL.Image.open(io.BytesIO(png)))[0, 0, 0] == step % 256
    if length >= 1000:  # spread out: no two chosen frames closer than a sixth of the episode
        assert min(b - a for a, b in itertools.pairwise(steps)) > length / 6
    assert len(sampler._kept) <= 4 * 4  # bounded memory, however long the episode


def test_sampler_asked_for_nothing_keeps_nothing() -> None:
    sampler = FrameSampler(0)
    sampler.add(0, frame(0))
    assert sampler.sample() == ([], [])
