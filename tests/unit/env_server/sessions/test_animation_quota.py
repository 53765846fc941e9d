"""Animations of episodes: a looping GIF Pillow reads back, at most the server's frames with the first and the last
kept, and only for the first successful and the first failed episodes asked; frames kept only while one is wanted."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from rlgpt.frames import png_bytes
from services.env_server.sessions.animation import AnimationQuota, gif_bytes
from services.env_server.sessions.episode import EnvSlot


def frame(value: int) -> np.ndarray:
    """A 64x64 frame whose top row tells it apart (its first pixel's red channel is ``value``)."""
    image = np.zeros((64, 64, 3), np.uint8)
    image[0, :, 0] = value
    return image


def frames_of(gif: bytes) -> list[np.ndarray]:
    animation = Image.open(io.BytesIO(gif))
    out = []
    for n in range(animation.n_frames):
        animation.seek(n)
        out.append(np.asarray(animation.convert("RGB")))
    return out


def play(quota: AnimationQuota, slot: EnvSlot, frames: int, success: bool, slots: list[EnvSlot]) -> None:
    """One episode of ``slot``: its first observation and ``frames`` frames, then its end."""
    slot.episode.success = success
    slot.image = frame(0)
    quota.start(slot)
    for step in range(1, frames + 1):
        if slot.animation is not None:
            slot.animation.add(step, frame(step))
    quota.end(slots, slots.index(slot))


def test_a_gif_holds_the_frames_in_order() -> None:
    gif = gif_bytes([png_bytes(frame(v)) for v in (10, 20, 30)])
    decoded = frames_of(gif)
    assert gif.startswith(b"GIF89a") and [int(f[0, 0, 0]) for f in decoded] == [10, 20, 30]
    assert Image.open(io.BytesIO(gif)).info["loop"] == 0
    assert gif_bytes([]) == b""


def test_long_episodes_are_subsampled_with_the_first_and_last_frames_kept() -> None:
    slots = [EnvSlot(None)]  # type: ignore[arg-type]  # the quota reads the slot's image and episode only
    quota = AnimationQuota(1, max_frames=20)
    play(quota, slots[0], frames=250, success=False, slots=slots)
    decoded = frames_of(slots[0].episode.animation)
    assert len(decoded) == 20
    assert int(decoded[0][0, 0, 0]) == 0 and int(decoded[-1][0, 0, 0]) == 250 % 256


def test_only_the_first_success_and_the_first_failure_are_animated_then_no_frames_are_kept() -> None:
    slots = [EnvSlot(None), EnvSlot(None), EnvSlot(None)]  # type: ignore[arg-type]
    quota = AnimationQuota(1, max_frames=10)
    play(quota, slots[0], frames=3, success=True, slots=slots)
    play(quota, slots[1], frames=3, success=True, slots=slots)
    assert len(frames_of(slots[0].episode.animation)) == 4 and slots[1].episode.animation == b""
    slots[2].image = frame(0)
    quota.start(slots[2])  # an episode still going when the last one wanted ends
    assert slots[2].animation is not None
    play(quota, slots[1], frames=2, success=False, slots=slots)
    assert slots[1].episode.animation and not quota.open
    assert slots[2].animation is None  # its frames are dropped: nothing more is wanted
    quota.start(slots[0])
    assert slots[0].animation is None
