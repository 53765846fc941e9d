"""Frames for a critic that looks: an RGB observation as PNG bytes, and a few frames of an episode sampled
evenly over it in bounded memory (the env server's RunSkill and the learner's Evaluate use both)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image  # Pillow comes with matplotlib, a dependency of every service

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_bytes(image: np.ndarray) -> bytes:
    """A uint8 ``[H, W, 3]`` RGB image as PNG bytes."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"expected a uint8 [H, W, 3] RGB image, got {image.dtype} {list(image.shape)}")
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(out, format="PNG")  # uint8 [H, W, 3] is RGB
    return out.getvalue()


def even_indices(n: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``range(n)``, the first and the last included (all when ``n <= k``;
    only the last when ``k`` is 1)."""
    if k <= 0 or n <= 0:
        return []
    if n <= k:
        return list(range(n))
    if k == 1:
        return [n - 1]
    return [round(i * (n - 1) / (k - 1)) for i in range(k)]


class FrameSampler:
    """Keeps ``k`` frames of one episode spread evenly over it, however long it runs.

    Frames are added in order, each with its episode step (a label: a policy's observations may be several
    env frames apart). Every ``stride``-th one added is kept, at most ``4 * k`` of them: when that fills up,
    every other kept frame is dropped and the stride doubles. The latest frame is always held too, so
    :meth:`sample` ends on the episode's last frame.
    """

    def __init__(self, k: int):
        self.k = k
        self._added = 0
        self._stride = 1
        self._kept: list[tuple[int, np.ndarray]] = []
        self._last: tuple[int, np.ndarray] | None = None

    def add(self, step: int, image: np.ndarray) -> None:
        if self.k <= 0:
            return
        frame = (step, np.array(image, np.uint8, copy=True))
        self._last = frame
        index, self._added = self._added, self._added + 1
        if index % self._stride == 0:
            self._kept.append(frame)
            if len(self._kept) > 4 * self.k:
                self._kept = self._kept[::2]
                self._stride *= 2

    def sample(self) -> tuple[list[int], list[bytes]]:
        """The steps and PNG bytes of up to ``k`` frames, in step order, the last frame included."""
        frames = list(self._kept)
        if self._last is not None and (not frames or frames[-1] is not self._last):
            frames.append(self._last)
        chosen = [frames[i] for i in even_indices(len(frames), self.k)]
        return [step for step, _ in chosen], [png_bytes(image) for _, image in chosen]
