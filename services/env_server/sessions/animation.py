"""Animations of episodes (EpisodeSummary.animation): the quota of a session or RunSkill call (the first
``animate`` successful and the first ``animate`` failed episodes get an animated GIF, the others none) and the
GIF itself, made from the frames an env kept of its episode (rlgpt.frames.FrameSampler: every frame offered,
held in bounded memory, subsampled evenly with the first and the last kept). Frames are kept only while the quota
is open."""

from __future__ import annotations

import io
from collections.abc import Sequence

from PIL import Image  # Pillow comes with matplotlib, a dependency of every service

from rlgpt.frames import FrameSampler
from services.env_server.sessions.episode import EnvSlot

GIF_FRAME_MS = 100
"""How long each frame of an animation shows."""


def gif_bytes(pngs: Sequence[bytes]) -> bytes:
    """An animated GIF (looping) of the PNG frames, in order, encoded in memory; b"" for no frames."""
    if not pngs:
        return b""
    images = [Image.open(io.BytesIO(png)).convert("RGB") for png in pngs]
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:], duration=GIF_FRAME_MS, loop=0)
    return out.getvalue()


class AnimationQuota:
    """Which episodes of a session (or RunSkill call) get an animation: the first ``wanted`` successful and the
    first ``wanted`` failed ones to end, each of at most ``max_frames`` frames."""

    def __init__(self, wanted: int, max_frames: int):
        self.wanted = wanted
        self.max_frames = max_frames
        self.successes = 0
        self.failures = 0

    @property
    def open(self) -> bool:
        """Whether an episode ending now may still get an animation (of either kind)."""
        return self.successes < self.wanted or self.failures < self.wanted

    def start(self, slot: EnvSlot) -> None:
        """``slot``'s episode is the client's from its current observation: its frames are kept from here (the
        session's frames add the next ones), unless the quota is used up."""
        slot.animation = FrameSampler(self.max_frames) if self.open else None
        if slot.animation is not None:
            slot.animation.add(slot.episode.steps, slot.image)

    def end(self, slots: Sequence[EnvSlot], i: int) -> None:
        """Env ``i``'s episode ended: its GIF (EpisodeSummary.animation) is made when its kind's quota is still
        open (it is then counted); once the quota is used up, no env keeps frames any more."""
        slot = slots[i]
        frames, slot.animation = slot.animation, None
        if frames is None:
            return
        success = slot.episode.success
        if success and self.successes < self.wanted:
            self.successes += 1
        elif not success and self.failures < self.wanted:
            self.failures += 1
        else:
            return
        slot.episode.animation = gif_bytes(frames.sample()[1])
        if not self.open:
            for other in slots:
                other.animation = None
