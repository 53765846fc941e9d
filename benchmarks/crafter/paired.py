"""Paired comparisons of the Crafter section's held-out rows: two rows that played the same worlds (bench-crafter's
held-out evaluation of an APPO variant, bench-game's scoring of an RL-GPT run) compared world by world.

The score difference is computed from the per-episode raw data; its 95% CI is a paired bootstrap over worlds:
world indices resampled with a fixed seed, both rows' scores recomputed on each resample by Crafter's formula
(``rlgpt/game_score.py``). Rows on different worlds are not compared.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchmarks.common import markdown_table
from rlgpt.game_score import crafter_score, success_rates

RESAMPLES, BOOTSTRAP_SEED = 2000, 0
"""Bootstrap resamples of the worlds per comparison, and the seed they are drawn with (so the CI is reproducible)."""
HOW_TO_PAIR = ("bench-crafter's `--eval-set K` with `--seed S` plays the worlds of bench-game's set K of a seed-S "
               "run")


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """A row's held-out episodes, one per world, in world order."""

    label: str
    achievements: tuple[str, ...]
    episodes: tuple[Mapping[str, Any], ...]
    """Episode records with ``seed`` (the world) and ``achievements`` (what it unlocked)."""

    @property
    def worlds(self) -> tuple[int, ...]:
        return tuple(int(e["seed"]) for e in self.episodes)

    @property
    def score(self) -> float:
        return crafter_score(success_rates([e["achievements"] for e in self.episodes], self.achievements))


def evaluation(label: str, achievements: Sequence[str], episodes: Sequence[Mapping[str, Any]]) -> Evaluation:
    return Evaluation(label, tuple(achievements), tuple(sorted(episodes, key=lambda e: int(e["seed"]))))


@dataclasses.dataclass(frozen=True)
class Comparison:
    """``a`` minus ``b`` on the same worlds."""

    a: Evaluation
    b: Evaluation
    difference: float
    low: float
    high: float
    """The 95% paired bootstrap CI of the difference."""


def _unlocked(row: Evaluation, names: Sequence[str]) -> np.ndarray:
    """Worlds x achievements: whether the world's episode unlocked it."""
    return np.array([[name in e["achievements"] for name in names] for e in row.episodes], dtype=bool)


def _scores(unlocked: np.ndarray, idx: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """The score of each resample (a row of world indices), its rates in percent as ``success_rates`` gives them."""
    rates = 100.0 * unlocked[idx].mean(axis=1)
    return np.array([crafter_score(dict(zip(names, row, strict=True))) for row in rates.tolist()])


def compare(a: Evaluation, b: Evaluation, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Comparison:
    """``a``'s score minus ``b``'s and its 95% paired bootstrap CI; ValueError when they played different worlds."""
    if a.worlds != b.worlds or set(a.achievements) != set(b.achievements):
        raise ValueError(f"{a.label} and {b.label} did not play the same worlds of the same game: not paired")
    names, n = a.achievements, len(a.worlds)
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    diffs = _scores(_unlocked(a, names), idx, names) - _scores(_unlocked(b, names), idx, names)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return Comparison(a, b, a.score - b.score, float(low), float(high))


def interval(row: Evaluation, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """The 95% bootstrap CI of one row's score over its worlds (how far a target like 10.0 is from the score)."""
    names = row.achievements
    idx = np.random.default_rng(seed).integers(0, len(row.episodes), size=(resamples, len(row.episodes)))
    low, high = np.percentile(_scores(_unlocked(row, names), idx, names), [2.5, 97.5])
    return float(low), float(high)


def interval_lines(evaluations: Sequence[Evaluation]) -> list[str]:
    """Each row's score with its 95% bootstrap CI over its worlds."""
    rows = [e for e in evaluations if e.episodes]
    if not rows:
        return []
    return [f"Each row's score with its 95% CI by a bootstrap over its worlds ({RESAMPLES:,} resamples, seed "
            f"{BOOTSTRAP_SEED}): " + "; ".join(
                f"{e.label} {e.score:.1f} ({low:.1f} to {high:.1f})" for e in rows
                for low, high in [interval(e)]) + "."]


def groups(evaluations: Sequence[Evaluation]) -> list[list[Evaluation]]:
    """The evaluations grouped by the worlds they played (and the game's achievements), in order of appearance."""
    found: dict[tuple[Any, ...], list[Evaluation]] = {}
    for e in evaluations:
        found.setdefault((e.worlds, frozenset(e.achievements)), []).append(e)
    return list(found.values())


def comparisons(evaluations: Sequence[Evaluation]) -> list[Comparison]:
    """Every pair of evaluations on the same worlds, the later row minus the earlier one."""
    return [compare(later, earlier) for group in groups(evaluations)
            for earlier, later in itertools.combinations(group, 2)]


def _worlds(worlds: tuple[int, ...]) -> str:
    if worlds == tuple(range(worlds[0], worlds[0] + len(worlds))):
        return f"{worlds[0]:,}..{worlds[-1]:,}"
    return f"{len(worlds)} worlds from {worlds[0]:,}"


def paired_lines(evaluations: Sequence[Evaluation]) -> list[str]:
    """The section's paired comparisons: a table of every pair on the same worlds, and which rows are not paired."""
    found = groups([e for e in evaluations if e.episodes])
    pairs = comparisons([e for group in found for e in group])
    if not pairs:
        lines = [f"Paired comparisons: none, no two rows played the same held-out worlds ({HOW_TO_PAIR})."]
    else:
        lines = [f"Paired comparisons of rows that played the same held-out worlds: score difference, 95% CI by a "
                 f"paired bootstrap over worlds ({RESAMPLES:,} resamples, seed {BOOTSTRAP_SEED}, both scores "
                 "recomputed on each by `rlgpt/game_score.py`).", "", *markdown_table(
                     ("row A", "row B", "worlds", "score A", "score B", "A minus B", "95% CI"),
                     [(c.a.label, c.b.label, len(c.a.worlds), f"{c.a.score:.1f}", f"{c.b.score:.1f}",
                       f"{c.difference:+.1f}", f"{c.low:+.1f} to {c.high:+.1f}") for c in pairs], "llrrrrr")]
    if len(found) > 1:
        lines += ["", "Rows on different worlds are not paired: " + " and ".join(
            f"{_worlds(group[0].worlds)} ({'; '.join(e.label for e in group)})" for group in found) + "."]
    return lines
