"""The Crafter section's paired comparisons: rows on the same held-out worlds (an APPO variant's held-out evaluation,
bench-game's scorings) compared world by world from the raw episodes, with a paired bootstrap CI over worlds; rows
on different worlds are not compared and the section says they are not paired."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.crafter.paired import compare, comparisons, evaluation, interval, interval_lines, paired_lines
from benchmarks.crafter.report import crafter_section
from benchmarks.game import raw
from rlgpt.game_score import crafter_score, success_rates

NAMES = ["collect_wood", "place_table", "collect_diamond", "wake_up"]
FIRST = 7_100_001
BASE = [["collect_wood", "place_table"], ["collect_wood"], [], ["collect_wood", "wake_up"], ["collect_wood"],
        [], ["place_table"], ["collect_wood", "place_table"]]


def episodes(unlocked: list[list[str]], first: int = FIRST) -> list[dict[str, Any]]:
    return [{"seed": first + i, "achievements": a, "length": 100, "end": "death", "death_cause": "zombie",
             "return": 1.0} for i, a in enumerate(unlocked)]


def more(extra: str = "collect_diamond") -> list[list[str]]:
    """BASE with ``extra`` unlocked in every world as well."""
    return [[*a, extra] for a in BASE]


def game_doc(name: str, unlocked: list[list[str]], first: int = FIRST) -> dict[str, Any]:
    scoring = {"set": (first - FIRST) // 10_000, "first_seed": first, "episodes_declared": len(unlocked),
               "declared_utc": "2026-11-28 10:00 UTC", "apart_from": [], "episode_length": 10_000,
               "achievements": NAMES, "status": "scored", "scored_utc": "2026-11-28 10:05 UTC",
               "episodes": episodes(unlocked, first)}
    return {"bench": "bench-game", "name": name,
            "run": {"dir": f"docs/runs/{name}", "id": name, "seed": 0, "task": "crafter", "llm": "Model M",
                    "frames_used": 1000, "frame_budget": 1_000_000, "llm_calls": 1, "tokens": 10,
                    "wall_seconds": 60.0},
            "controller": {"kind": "chain", "recorded": "chain: wood (code)", "skills": {}}, "scorings": [scoring]}


def appo_results(unlocked: list[list[str]], first: int = FIRST) -> dict[str, Any]:
    run = {"variant": "appo", "skills": [], "achievements": NAMES, "frames": 1_000_000, "budget": 1_000_000,
           "complete": True, "wall_s": 60.0, "train_s": 60.0,
           "episodes": [{"achievements": [], "frames": 100, "end_frame": 100, "return": 0.0, "end": "death"}],
           "held_out": {"first_seed": first, "set": (first - FIRST) // 10_000, "episodes": episodes(unlocked, first)}}
    return {"date_utc": "2026-11-29 00:00 UTC",
            "settings": {"episode_length": 10_000, "num_workers": 2, "envs_per_worker": 8, "seed": 0},
            "machine": {"cpu_model": "Test CPU", "cpu_count": 2, "ram_gib": 8.0, "python": "3.11", "torch": "2",
                        "sample_factory": "2", "crafter": "1.8"},
            "variants": {"appo": run}}


def on_disk(tmp_path: Path, *docs: dict[str, Any]) -> list[dict[str, Any]]:
    """The documents saved and read back as the report reads bench-game's raw files."""
    for doc in docs:
        raw.save(raw.raw_file(tmp_path, doc["name"]), doc)
    return raw.load_all(tmp_path)


def test_identical_rows_differ_by_zero_with_a_zero_ci() -> None:
    c = compare(evaluation("a", NAMES, episodes(BASE)), evaluation("b", NAMES, episodes(BASE)))
    assert (c.difference, c.low, c.high) == (0.0, 0.0, 0.0)


def test_a_row_that_unlocks_strictly_more_differs_positively_beyond_chance() -> None:
    c = compare(evaluation("more", NAMES, episodes(more())), evaluation("base", NAMES, episodes(BASE)))
    base = crafter_score(success_rates(BASE, NAMES))
    assert c.difference == pytest.approx(crafter_score(success_rates(more(), NAMES)) - base) and c.difference > 0
    assert 0 < c.low <= c.high


def test_the_ci_is_the_official_score_recomputed_on_resampled_worlds() -> None:
    """The bootstrap's scores equal success_rates and crafter_score on the resampled episodes themselves."""
    a, b = more("wake_up"), BASE
    c = compare(evaluation("a", NAMES, episodes(a)), evaluation("b", NAMES, episodes(b)), resamples=50, seed=3)
    idx = np.random.default_rng(3).integers(0, len(a), size=(50, len(a)))
    diffs = [crafter_score(success_rates([a[i] for i in row], NAMES))
             - crafter_score(success_rates([b[i] for i in row], NAMES)) for row in idx]
    assert (c.low, c.high) == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])))
    assert compare(evaluation("a", NAMES, episodes(a)), evaluation("b", NAMES, episodes(b)), resamples=50,
                   seed=3) == c  # a fixed seed: the same CI every rendering


def test_worlds_are_paired_by_seed_whatever_their_order() -> None:
    shuffled = list(reversed(episodes(BASE)))
    c = compare(evaluation("a", NAMES, shuffled), evaluation("b", NAMES, episodes(BASE)))
    assert (c.difference, c.low, c.high) == (0.0, 0.0, 0.0)


def test_rows_on_different_worlds_are_not_compared() -> None:
    here, there = evaluation("a", NAMES, episodes(BASE)), evaluation("b", NAMES, episodes(BASE, FIRST + 10_000))
    assert comparisons([here, there]) == []
    with pytest.raises(ValueError, match="not paired"):
        compare(here, there)
    lines = paired_lines([here, there])
    assert lines[0].startswith("Paired comparisons: none, no two rows played the same held-out worlds")
    assert lines[-1] == ("Rows on different worlds are not paired: 7,100,001..7,100,008 (a) and "
                         "7,110,001..7,110,008 (b).")


def test_the_section_compares_appo_and_rl_gpt_on_the_same_worlds(tmp_path: Path) -> None:
    games = on_disk(tmp_path, game_doc("run-a", more()), game_doc("run-b", BASE),
                    game_doc("run-c", BASE, FIRST + 10_000))
    section = crafter_section(appo_results(BASE), games, None)
    base, better = crafter_score(success_rates(BASE, NAMES)), crafter_score(success_rates(more(), NAMES))
    assert (f"APPO, primitives, held-out: 8 worlds (7,100,001..7,100,008, bench-game's set 0 of a seed-0 run, never "
            f"trained on), the trained policy sampling its actions: score {base:.1f}.") in section
    assert "Paired comparisons of rows that played the same held-out worlds" in section
    row = f"| 8 | {better:.1f} | {base:.1f} | {better - base:+.1f} | +"
    assert f"| RL-GPT run-a, set 0 | APPO, primitives, held-out {row}" in section
    assert f"| RL-GPT run-b, set 0 | RL-GPT run-a, set 0 | 8 | {base:.1f} | {better:.1f} | {base - better:+.1f} | -" \
        in section  # the later row minus the earlier
    assert f"| RL-GPT run-b, set 0 | APPO, primitives, held-out | 8 | {base:.1f} | {base:.1f} | +0.0 | +0.0 to +0.0 |" \
        in section
    assert "RL-GPT run-c, set 1 |" not in section.split("Paired comparisons")[1].split("not paired")[0]
    assert ("Rows on different worlds are not paired: 7,100,001..7,100,008 (APPO, primitives, held-out; RL-GPT run-a, "
            "set 0; RL-GPT run-b, set 0) and 7,110,001..7,110,008 (RL-GPT run-c, set 1).") in section


def test_a_rows_score_interval_brackets_its_score_and_is_a_point_for_identical_worlds() -> None:

    names = ("collect_wood", "place_table")
    same = evaluation("same", names, [{"seed": s, "achievements": ["collect_wood"]} for s in range(20)])
    assert interval(same) == pytest.approx((same.score, same.score))  # every world alike: no spread
    mixed = evaluation("mixed", names, [{"seed": s, "achievements": ["collect_wood"] * (s % 2)} for s in range(40)])
    low, high = interval(mixed)
    assert low < mixed.score < high
    assert f"mixed {mixed.score:.1f} ({low:.1f} to {high:.1f})" in interval_lines([mixed])[0]
