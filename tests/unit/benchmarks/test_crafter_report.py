"""bench-crafter's section and plot come from the per-episode raw results alone (rates and score recomputed from
them); partial runs are marked partial; a row without per-episode data shows no number and says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from benchmarks.crafter.report import NO_APPO_DATA, SECTION_TITLE, crafter_section, plot_rates, render_section
from rlgpt.game_score import crafter_score

NAMES = ["collect_wood", "place_table", "collect_diamond"]


def episodes(rates: list[float], count: int = 10, frames: int = 250) -> list[dict]:
    """``count`` training episodes in which achievement k is unlocked in the first rates[k]% of them."""
    return [{"achievements": [n for n, r in zip(NAMES, rates, strict=True) if i < r * count / 100],
             "frames": frames, "end_frame": frames * (i + 1), "return": 2.5, "end": "death"} for i in range(count)]


def run(variant: str, rates: list[float], frames: int, skills: list[str]) -> dict:
    return {"variant": variant, "skills": skills, "achievements": NAMES, "episodes": episodes(rates),
            "frames": frames, "budget": 1_000_000, "complete": frames >= 1_000_000, "wall_s": 60.0,
            "train_s": 1800.0}


def results() -> dict:
    return {"date_utc": "2026-01-01 00:00 UTC", "settings": {"episode_length": 10000, "num_workers": 2,
                                                             "envs_per_worker": 8, "seed": 0},
            "machine": {"cpu_model": "Test CPU", "cpu_count": 2, "ram_gib": 8.0, "python": "3.11", "torch": "2",
                        "sample_factory": "2", "crafter": "1.8"},
            "variants": {"appo": run("appo", [90.0, 40.0, 0.0], 1_000_000, []),
                         "reference-skills": run("reference-skills", [90.0, 80.0, 0.0], 400_000,
                                                 ["collect_wood", "place_table"])}}


def test_a_held_out_evaluation_is_reported_with_its_worlds_and_its_score_from_its_episodes() -> None:
    data = results()
    held = [{"seed": 7_100_001 + i, "achievements": ["collect_wood"] if i < 2 else [], "length": 100,
             "end": "death", "death_cause": "zombie", "return": 1.0} for i in range(16)]
    data["variants"]["appo"]["held_out"] = {"first_seed": 7_100_001, "set": 0, "episodes": held}
    score = crafter_score({"collect_wood": 12.5, "place_table": 0.0, "collect_diamond": 0.0})
    section = render_section(data, None)
    assert (f"APPO, primitives, held-out: 16 worlds (7,100,001..7,100,016, bench-game's set 0 of a seed-0 run, never "
            f"trained on), the trained policy sampling its actions: score {score:.1f}.") in section
    assert "Paired comparisons: none, no two rows played the same held-out worlds" in section


def test_section_is_rendered_from_the_episodes() -> None:
    section = render_section(results(), "figures/crafter.png")
    assert section.startswith(SECTION_TITLE)
    score = crafter_score({"a": 90.0, "b": 40.0, "c": 0.0})
    assert f"| APPO, primitives | - | 1,000,000 of 1,000,000 | 10 | {score:.1f} | 2.50 | 250 | 30 |" in section
    assert "| APPO + reference skills | collect_wood, place_table | 400,000 of 1,000,000 (partial) |" in section
    assert "| place_table | 40.0% | 80.0% |" in section
    assert f"APPO, primitives: score {score:.1f}, 2 of 3 achievements unlocked at least once" in section
    assert "PPO 4.6" in section and "![Crafter success rates](figures/crafter.png)" in section


def test_an_episode_changed_in_the_raw_data_changes_the_rates_and_the_score() -> None:
    data = results()
    data["variants"]["appo"]["episodes"][9]["achievements"].append("collect_diamond")
    section = render_section(data, None)
    assert "| collect_diamond | 10.0% | 0.0% |" in section
    assert f"| {crafter_score({'a': 90.0, 'b': 40.0, 'c': 10.0}):.1f} |" in section


def test_only_episodes_within_the_budget_count() -> None:
    data = results()
    data["variants"]["appo"]["budget"] = 1000  # episodes end at 250, 500, ...: the first 4 count
    assert "| collect_wood | 100.0% |" in render_section(data, None)


def test_a_row_without_per_episode_data_shows_no_number_and_says_so() -> None:
    data = results()
    old = data["variants"]["reference-skills"]
    old.update(episodes=5798, score=6.0, rates=dict.fromkeys(NAMES, 50.0))  # the format before per-episode data
    section = render_section(data, None)
    assert "APPO + reference skills: its per-episode data is not on disk" in section
    assert "6.0" not in section and "50.0%" not in section
    nothing = crafter_section(None, [], "figures/x.png")  # bench-crafter's raw results not on disk at all
    assert nothing.startswith(f"{SECTION_TITLE}\n\n{NO_APPO_DATA}\n") and "![" not in nothing  # no data: no plot


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
    summary = summarise(tmp_path, 120)
    assert summary["train_s"] == 90 and summary["frames"] == 700  # within 120 frames: the first episode alone
    assert summary["episodes"] == [{"achievements": ["collect_wood"], "frames": 100, "end_frame": 100,
                                    "return": 1.0, "end": ""}]
