"""The final controller's animations: the first successful and the first failed episode's GIF written under the
run directory, upscaled with nearest-neighbour and their frame durations kept; bytes Pillow cannot decode are
skipped with a warning."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from PIL import Image, ImageSequence

from rlgpt.v1 import common_pb2
from services.planner.animations import write_animations


def _gif(colours: list[tuple[int, int, int]], durations: list[int]) -> bytes:
    frames = [Image.new("RGB", (64, 64), colour) for colour in colours]
    frames[0].putpixel((0, 0), (255, 255, 255))  # one pixel apart, to see that upscaling keeps it sharp
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=durations, loop=0)
    return out.getvalue()


def _frames(path: Path) -> list[tuple[Image.Image, int]]:
    with Image.open(path) as image:
        return [(frame.convert("RGB").copy(), frame.info["duration"]) for frame in ImageSequence.Iterator(image)]


def test_the_first_success_and_failure_are_written_upscaled(tmp_path: Path) -> None:
    red_green = _gif([(200, 0, 0), (0, 200, 0)], [80, 250])
    episodes = [common_pb2.EpisodeSummary(success=False),  # no animation: passed over
                common_pb2.EpisodeSummary(success=False, animation=red_green),
                common_pb2.EpisodeSummary(success=True, animation=_gif([(0, 0, 200)] * 2, [100, 100])),
                common_pb2.EpisodeSummary(success=False, animation=b"GIF89a later")]
    written = write_animations(tmp_path, episodes)
    assert written == {"failure": "animations/final_failure.gif", "success": "animations/final_success.gif"}
    frames = _frames(tmp_path / written["failure"])
    assert [duration for _, duration in frames] == [80, 250]
    first, _ = frames[0]
    assert first.size == (256, 256)
    # Nearest-neighbour: the white pixel is a sharp 4x4 block, its neighbour is the frame's colour.
    assert {first.getpixel((x, y)) for x in range(4) for y in range(4)} == {(255, 255, 255)}
    assert first.getpixel((4, 0)) == (200, 0, 0) and frames[1][0].getpixel((100, 100)) == (0, 200, 0)
    assert sorted(p.name for p in (tmp_path / "animations").iterdir()) == ["final_failure.gif", "final_success.gif"]


def test_bytes_that_are_no_gif_are_skipped_with_a_warning(tmp_path: Path, caplog) -> None:
    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, format="PNG")
    good = _gif([(0, 0, 0), (9, 9, 9)], [100, 100])
    episodes = [common_pb2.EpisodeSummary(success=False, animation=b"\x00not a gif"),
                common_pb2.EpisodeSummary(success=False, animation=good[: len(good) // 2]),  # cut short
                common_pb2.EpisodeSummary(success=True, animation=png.getvalue()),
                common_pb2.EpisodeSummary(success=False, animation=good)]
    with caplog.at_level(logging.WARNING, logger="services.planner.animations"):
        written = write_animations(tmp_path, episodes, name="iteration_1")
    assert written == {"failure": "animations/iteration_1_failure.gif"}  # the next failure, once decodable
    assert len(caplog.records) == 3 and all("skipped" in r.getMessage() for r in caplog.records)
    assert write_animations(tmp_path / "none", [common_pb2.EpisodeSummary(animation=b"junk")]) == {}
    assert not (tmp_path / "none").exists()


def test_a_name_that_is_no_plain_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a plain name"):
        write_animations(tmp_path, [], name="../final")
