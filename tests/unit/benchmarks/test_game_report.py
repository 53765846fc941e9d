"""bench-game's rows of the Crafter section and its plot come from a raw file alone: the score and the 22 rates
recomputed from its episodes by rlgpt/game_score.py, every scoring listed (declared sets not scored too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image

from benchmarks import headlines
from benchmarks.crafter.report import SECTION_TITLE, crafter_section, plot_achievements
from benchmarks.game import raw
from rlgpt.game_score import crafter_score

NAMES = ["collect_wood", "place_table", "collect_diamond", "wake_up"]
ENDS = [(["collect_wood", "place_table"], 300, "death", "attacked by zombie"),
        (["collect_wood"], 120, "death", "shot by skeleton"),
        (["collect_wood", "place_table", "wake_up"], 10_000, "time_limit", ""),
        ([], 80, "death", "attacked by zombie")]


def scoring(set_index: int, status: str = "scored") -> dict[str, Any]:
    first = 7_100_001 + 10_000 * set_index
    episodes = [{"seed": first + i, "achievements": a, "length": n, "end": end, "death_cause": cause, "return": 1.0}
                for i, (a, n, end, cause) in enumerate(ENDS)] if status == "scored" else []
    return {"set": set_index, "first_seed": first, "episodes_declared": 4, "declared_utc": "2026-11-28 10:00 UTC",
            "apart_from": [["final evaluation", 7_001_001, 7_001_256]], "episode_length": 10_000,
            "achievements": NAMES, "status": status, "scored_utc": "2026-11-28 10:05 UTC", "episodes": episodes}


def doc(*scorings: dict[str, Any]) -> dict[str, Any]:
    return {"bench": "bench-game", "name": "relay-game",
            "run": {"dir": "docs/runs/relay-game", "id": "relay-game", "seed": 0, "task": "crafter", "llm": "Model M",
                    "frames_used": 912_345, "frame_budget": 1_000_000, "llm_calls": 41, "tokens": 123_456,
                    "wall_seconds": 5400.0},
            "controller": {"kind": "chain", "recorded": "chain: wood (code) -> table (code)", "skills": {}},
            "scorings": list(scorings)}


def written(tmp_path: Path, document: dict[str, Any]) -> list[dict[str, Any]]:
    """The document saved as the bench saves it and read back as the report reads every raw file."""
    raw.save(raw.raw_file(tmp_path, document["name"]), document)
    return raw.load_all(tmp_path)


def test_the_score_and_rates_are_recomputed_from_the_raw_episodes(tmp_path: Path) -> None:
    section = crafter_section(None, written(tmp_path, doc(scoring(0))), "figures/crafter_achievements.png")
    score = crafter_score({"collect_wood": 75.0, "place_table": 50.0, "collect_diamond": 0.0, "wake_up": 25.0})
    assert section.startswith(SECTION_TITLE)
    assert (f"| RL-GPT relay-game, set 0 | chain | Model M | 7,100,001..7,100,004 | 2026-11-28 10:00 UTC | 4 of 4 | "
            f"{score:.1f} | 2,625 | 3 of 4 | 912,345 | 41 | 123,456 | 90 |") in section
    assert "| collect_wood | 75.0% |" in section and "| wake_up | 25.0% |" in section
    assert ("episodes ended by death 3, time_limit 1; death causes: attacked by zombie 2, shot by skeleton 1; "
            "3 of 4 achievements unlocked at least once (never: collect_diamond)") in section
    assert "![Crafter success rates](figures/crafter_achievements.png)" in section


def test_an_episode_changed_in_the_raw_file_changes_the_section(tmp_path: Path) -> None:
    changed = doc(scoring(0))
    changed["scorings"][0]["episodes"][3]["achievements"] = ["collect_diamond"]
    section = crafter_section(None, written(tmp_path, changed), None)
    score = crafter_score({"collect_wood": 75.0, "place_table": 50.0, "collect_diamond": 25.0, "wake_up": 25.0})
    assert f"| 4 of 4 | {score:.1f} |" in section and "| collect_diamond | 25.0% |" in section


def test_every_scoring_is_listed_a_declared_set_too(tmp_path: Path) -> None:
    section = crafter_section(None, written(tmp_path, doc(scoring(0), scoring(1, "declared"))), None)
    assert "| RL-GPT relay-game, set 0 |" in section
    assert "| RL-GPT relay-game, set 1 | chain | Model M | 7,110,001..7,110,004 | 2026-11-28 10:00 UTC | 0 of 4 | " \
           "not scored |" in section
    header = next(line for line in section.splitlines() if line.startswith("| achievement |"))
    assert header == "| achievement | RL-GPT relay-game, set 0 |"  # only scored sets have rates


def test_shorter_episodes_than_the_benchmarks_are_said(tmp_path: Path) -> None:
    short = doc(scoring(0))
    short["scorings"][0]["episode_length"] = 300
    assert "Episodes of at most 300 frames, not the benchmark's 10,000." in crafter_section(
        None, written(tmp_path, short), None)


def test_the_raw_file_keeps_an_episode_a_line(tmp_path: Path) -> None:
    written(tmp_path, doc(scoring(0)))
    lines = raw.raw_file(tmp_path, "relay-game").read_text().splitlines()
    assert sum('"seed": 71000' in line for line in lines) == 4


def test_the_plot_is_a_png_and_no_data_draws_none(tmp_path: Path) -> None:
    path = plot_achievements(None, written(tmp_path, doc(scoring(0))), tmp_path / "crafter.png")
    assert path is not None
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 600
    assert plot_achievements(None, [doc(scoring(0, "declared"))], tmp_path / "none.png") is None


def test_the_headline_of_a_run_with_an_achievement_task_leads_with_its_success() -> None:
    """A collect_diamond run scored on the whole game: the README row says how often its task was done on the
    held-out worlds, not only the game's score; a whole-game run's row has the score alone."""
    task_run = doc(scoring(0))
    task_run["run"]["task"], task_run["name"] = "place_table", "relay-table"
    row = headlines.game([doc(scoring(0)), task_run], ()).result
    game_cell, task_cell = row.split("; ")
    assert game_cell.startswith("relay-game: score ") and " in " not in game_cell
    assert task_cell.startswith("relay-table: place_table in 50.0% (2/4), score ")
