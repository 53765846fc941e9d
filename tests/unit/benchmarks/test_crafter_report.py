"""bench-crafter's section and plot come from the saved results alone; partial runs are marked partial."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from benchmarks.crafter.report import SECTION_TITLE, plot_rates, render_section
from rlgpt.game_score import crafter_score

NAMES = ["collect_wood", "place_table", "collect_diamond"]


def run(variant: str, rates: list[float], frames: int, skills: list[str]) -> dict:
    by_name = dict(zip(NAMES, rates, strict=True))
    return {"variant": variant, "skills": skills, "achievements": NAMES, "rates": by_name,
            "score": crafter_score(by_name), "episodes": 40, "frames": frames, "budget": 1_000_000,
            "complete": frames >= 1_000_000, "mean_return": 2.5, "mean_length": 250.0, "wall_s": 60.0,
            "train_s": 1800.0}


def results() -> dict:
    return {"date_utc": "2026-01-01 00:00 UTC", "settings": {"episode_length": 10000, "num_workers": 2,
                                                             "envs_per_worker": 8, "seed": 0},
            "machine": {"cpu_model": "Test CPU", "cpu_count": 2, "ram_gib": 8.0, "python": "3.11", "torch": "2",
                        "sample_factory": "2", "crafter": "1.8"},
            "variants": {"appo": run("appo", [90.0, 40.0, 0.0], 1_000_000, []),
                         "reference-skills": run("reference-skills", [95.0, 80.0, 0.0], 400_000,
                                                 ["collect_wood", "place_table"])}}


def test_a_held_out_evaluation_is_reported_with_its_seeds() -> None:
    data = results()
    data["variants"]["appo"]["held_out"] = {"episodes": 16, "first_seed": 7_000_001, "score": 3.25,
                                            "rates": dict.fromkeys(NAMES, 10.0)}
    assert ("APPO, primitives on 16 held-out worlds (seeds from 7,000,001, never trained on), the trained policy "
            "sampling its actions: score 3.2.") in render_section(data, None)


def test_section_is_rendered_from_the_data() -> None:
    section = render_section(results(), "figures/crafter.png")
    assert section.startswith(SECTION_TITLE)
    score = crafter_score({"a": 90.0, "b": 40.0, "c": 0.0})
    assert f"| APPO, primitives | - | 1,000,000 of 1,000,000 | 40 | {score:.1f} | 2.50 | 250 | 30 |" in section
    assert "| APPO + reference skills | collect_wood, place_table | 400,000 of 1,000,000 (partial) |" in section
    assert "| place_table | 40.0% | 80.0% |" in section
    assert f"APPO, primitives: score {score:.1f} over 40 episodes; 2 of 3 achievements unlocked at least once " \
           "(never: collect_diamond)." in section
    assert "PPO 4.6" in section and "![Crafter success rates](figures/crafter.png)" in section


def test_the_plot_is_a_png(tmp_path: Path) -> None:
    path = plot_rates(results(), tmp_path / "crafter.png")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 600


def test_a_library_variant_takes_the_skills_a_run_left(tmp_path: Path) -> None:
    from benchmarks.crafter.run import load_library, variant_skills

    path = tmp_path / "skill_library.json"
    path.write_text('[{"name": "get_wood", "code": "def skill(agent):\\n    yield \'do\'\\n", "description": "d"}]')
    library = load_library(path)
    assert variant_skills("library-skills", library) == library and list(library) == ["get_wood"]
    assert variant_skills("appo", library) == {}
    assert set(variant_skills("reference-skills", None)) == {"collect_wood", "place_table"}
    path.write_text("[]")
    with pytest.raises(ValueError, match="no skills in this library"):
        load_library(path)
    with pytest.raises(ValueError, match="needs --library"):
        variant_skills("library-skills", None)


def test_training_time_sums_every_invocation_and_episodes_are_ordered(tmp_path: Path) -> None:
    import json

    from benchmarks.crafter.run import read_episodes, summarise

    (tmp_path / "episodes").mkdir()
    (tmp_path / "episodes" / "worker0-0.jsonl").write_text(
        json.dumps({"time": 3, "frames": 50, "achievements": ["place_table"], "success": False, "return": 1.0}) + "\n"
        + json.dumps({"time": 1, "frames": 100, "achievements": ["collect_wood"], "success": False, "return": 1.0}))
    (tmp_path / "progress.jsonl").write_text("".join(json.dumps({"elapsed": e, "env_frames": f}) + "\n" for e, f in
                                                     [(10, 100), (60, 400), (5, 420), (30, 700)]))
    assert [e["end_frame"] for e in read_episodes(tmp_path)] == [100, 150]
    summary = summarise(tmp_path, 120, NAMES)
    assert summary["train_s"] == 90 and summary["frames"] == 700 and summary["episodes"] == 1  # within 120 frames
    assert summary["rates"]["collect_wood"] == 100.0 and summary["rates"]["place_table"] == 0.0
