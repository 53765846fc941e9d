"""The success rates and score of bench-crafter and the planner (rlgpt/game_score.py) equal Crafter's own analysis
code on Crafter's recorded human episodes (crafter_reference/: Crafter's analysis/common.py and
scores/crafter_reward-human.json, vendored unchanged)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from rlgpt.game_score import crafter_score, success_rates, within_budget

REFERENCE = Path(__file__).parent / "crafter_reference"


def crafter_analysis():
    spec = importlib.util.spec_from_file_location("crafter_analysis_common", REFERENCE / "analysis_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def human_runs() -> list[dict]:
    return json.loads((REFERENCE / "crafter_reward-human.json").read_text())


def episodes_of(run: dict) -> tuple[list[str], list[list[str]]]:
    names = sorted(key.removeprefix("achievement_") for key in run if key.startswith("achievement_"))
    episodes = [[name for name in names if run[f"achievement_{name}"][i] >= 1] for i in range(len(run["xs"]))]
    return names, episodes


def test_rates_and_score_equal_crafters_own_on_recorded_human_episodes() -> None:
    analysis, runs = crafter_analysis(), human_runs()
    percents, methods, seeds, tasks = analysis.compute_success_rates(runs, budget=1e6)
    theirs = analysis.compute_scores(percents)  # [method, seed]
    assert methods == ["human"] and len(seeds) == 5 and len(tasks) == 22
    ours = []
    for run in runs:
        names, episodes = episodes_of(run)
        rates = success_rates(episodes, names)
        j = seeds.index(run["seed"])
        assert [rates[t.removeprefix("achievement_")] for t in tasks] == pytest.approx(list(percents[0, j]))
        ours.append(crafter_score(rates))
        assert ours[-1] == pytest.approx(theirs[0, j], rel=1e-12)
    # The paper's human expert score, 50.5, is the mean over these seeds.
    assert np.mean(ours) == pytest.approx(50.5, abs=0.05)


def test_the_score_is_the_geometric_mean_with_a_one_percent_offset() -> None:
    assert crafter_score({"a": 0.0, "b": 0.0}) == 0.0
    assert crafter_score({"a": 100.0, "b": 100.0}) == pytest.approx(100.0)
    assert crafter_score({"a": 3.0, "b": 15.0}) == pytest.approx(math.sqrt(4 * 16) - 1)
    assert crafter_score({"a": 3.0, "b": math.nan}) == pytest.approx(3.0)  # no episodes: left out, as Crafter does
    with pytest.raises(ValueError, match="percentages"):
        crafter_score({"a": 0.5e3})


def test_rates_count_episodes_not_unlocks_and_refuse_unknown_names() -> None:
    rates = success_rates([["wood"], ["wood", "table"], []], ["wood", "table", "diamond"])
    assert rates == {"wood": pytest.approx(200 / 3), "table": pytest.approx(100 / 3), "diamond": 0.0}
    assert math.isnan(success_rates([], ["wood"])["wood"])
    with pytest.raises(ValueError, match="not among the achievements"):
        success_rates([["fly"]], ["wood"])


def test_only_episodes_that_ended_within_the_budget_count() -> None:
    episodes = [{"end_frame": 10}, {"end_frame": 1_000_000}, {"end_frame": 1_000_001}]
    assert within_budget(episodes, 1_000_000) == episodes[:2]
