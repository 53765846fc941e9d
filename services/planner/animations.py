"""GIFs of the final controller at play: one successful and one failed episode, for the run's report.

The env server attaches an animated GIF to the first few successful and failed episodes an evaluation asks for
(``EpisodeSummary.animation``; Crafter's frames are 64x64). They are written under ``<run_dir>/animations/``,
upscaled with nearest-neighbour so a person can see the pixels, with every frame's duration kept. The bytes come
from another process: a GIF that Pillow cannot decode is skipped with a warning and never fails the run.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageSequence

from rlgpt.v1 import common_pb2

log = logging.getLogger(__name__)

ANIMATIONS_DIR = "animations"
"""The folder of the run directory that holds the GIFs (sent with the report by ``GetRunReport``)."""
TARGET_PIXELS = 256
"""A GIF is upscaled by the largest whole factor that keeps its longer side at most this (64x64 -> x4)."""
MAX_FRAMES = 2000
"""Frames kept of one GIF at most (the env server subsamples to fewer; a longer one is cut, not refused)."""
SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What ``name`` may be: it names files of the run directory."""
DEFAULT_DURATION_MS = 100
"""A frame's duration where the GIF gives none."""


def upscaled_gif(data: bytes) -> bytes:
    """``data`` (a GIF) upscaled with nearest-neighbour, each frame's duration kept, looping forever.

    Raises whatever Pillow raises on bytes it cannot decode (the caller skips them).
    """
    with Image.open(io.BytesIO(data)) as image:
        if image.format != "GIF":
            raise ValueError(f"not a GIF but {image.format}")
        scale = max(1, TARGET_PIXELS // max(image.size))
        frames: list[Image.Image] = []
        durations: list[int] = []
        for frame in ImageSequence.Iterator(image):
            durations.append(int(frame.info.get("duration") or DEFAULT_DURATION_MS))
            rgb = frame.convert("RGB")
            frames.append(rgb.resize((rgb.width * scale, rgb.height * scale), Image.Resampling.NEAREST))
            if len(frames) >= MAX_FRAMES:
                break
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=durations, loop=0)
    return out.getvalue()


def write_animations(run_dir: Path, episodes: Sequence[common_pb2.EpisodeSummary],
                     name: str = "final") -> dict[str, str]:
    """Writes ``animations/<name>_success.gif`` and ``<name>_failure.gif`` under ``run_dir`` from the first
    successful and the first failed episode that carry an animation (one that cannot be decoded is skipped and
    the next of its kind tried); returns ``{"success": path, "failure": path}`` (paths relative to ``run_dir``)
    for those written."""
    if not SAFE_NAME.fullmatch(name):
        raise ValueError(f"animation name {name[:40]!r} is not a plain name (letters, digits, _ and -)")
    written: dict[str, str] = {}
    for episode in episodes:
        kind = "success" if episode.success else "failure"
        if kind in written or not episode.animation:
            continue
        try:
            data = upscaled_gif(episode.animation)
        except Exception as exc:  # untrusted bytes: Pillow raises many kinds on malformed data
            log.warning("an episode's animation (%s, %d bytes) could not be decoded and is skipped: %s: %s",
                        kind, len(episode.animation), type(exc).__name__, str(exc)[:200])
            continue
        relative = f"{ANIMATIONS_DIR}/{name}_{kind}.gif"
        path = Path(run_dir) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # a report being sent never reads half a GIF
        written[kind] = relative
        if len(written) == 2:
            break
    return written
