"""Crafter's benchmark numbers, computed as Crafter's analysis code computes them (analysis/common.py): the one
owner of the formula, which bench-crafter and the planner (a task whose objective is the whole game) both use.

An achievement's success rate is the percentage of episodes (all episodes that ended within the frame budget)
in which it was unlocked at least once; the score is the geometric mean of the rates with an offset of 1%,
exp(mean(ln(1 + s_i))) - 1 with s_i in percent. The achievements' names come from the env server (Describe),
never from a list typed here. tests/unit/rlgpt/test_game_score.py checks both against Crafter's own
code on recorded human episodes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence


def success_rates(episodes: Sequence[Iterable[str]], achievements: Sequence[str]) -> dict[str, float]:
    """Percent of ``episodes`` (each: the names it unlocked) in which each achievement was unlocked."""
    unlocked = [set(episode) for episode in episodes]
    unknown = set().union(*unlocked) - set(achievements) if unlocked else set()
    if unknown:
        raise ValueError(f"episodes unlocked {sorted(unknown)}, which are not among the achievements given")
    if not unlocked:
        return {name: math.nan for name in achievements}
    return {name: 100.0 * sum(name in episode for episode in unlocked) / len(unlocked) for name in achievements}


def crafter_score(rates: Mapping[str, float]) -> float:
    """exp(mean(ln(1 + s_i))) - 1 over the success rates in percent (rates of no episodes, NaN, are left out)."""
    values = [rate for rate in rates.values() if not math.isnan(rate)]
    if any(not 0.0 <= rate <= 100.0 for rate in values):
        raise ValueError("success rates are percentages, 0..100")
    if not values:
        return math.nan
    return math.exp(sum(math.log(1.0 + rate) for rate in values) / len(values)) - 1.0


def within_budget(episodes: Sequence[Mapping[str, object]], budget: int) -> list[Mapping[str, object]]:
    """The episodes that ended within the first ``budget`` frames of training (``end_frame``), as Crafter counts."""
    return [episode for episode in episodes if int(episode["end_frame"]) <= budget]  # type: ignore[call-overload]
