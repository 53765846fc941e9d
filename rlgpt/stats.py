"""Success rates that say how sure they are, and comparisons of two controllers on the same worlds.

Every evaluation of a run plays the same worlds in the same order (rlgpt/worlds.py), so two controllers are
compared world by world: the worlds where only one of them succeeded decide (the exact McNemar test, a two-sided
binomial test on those discordant worlds). A rate alone gets the Wilson score interval, which stays inside 0..1
and is honest for the small counts of a run's evaluations.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

Z95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a success rate of ``successes`` out of ``n`` (``(0, 1)`` when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_text(successes: int, n: int) -> str:
    """``"75% (24/32, 95% CI 58-87%)"``: a rate with its count and Wilson interval."""
    if n <= 0:
        return "not evaluated"
    low, high = wilson_interval(successes, n)
    return f"{successes / n:.0%} ({successes}/{n}, 95% CI {100 * low:.0f}-{high:.0%})"


def exact_mcnemar_p(only_new: int, only_old: int) -> float:
    """The two-sided exact McNemar p-value: how likely a split at least this uneven of the discordant worlds is when
    both controllers are equally good (1.0 when there are none)."""
    n = only_new + only_old
    if n == 0:
        return 1.0
    k = min(only_new, only_old)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclasses.dataclass(frozen=True)
class Paired:
    """Two controllers' outcomes on the same worlds, world by world."""

    worlds: int
    """Worlds both played (the shorter list's length)."""
    only_new: int
    """Worlds the new controller solved and the old one did not."""
    only_old: int
    """Worlds the old controller solved and the new one did not."""
    p_value: float
    """Two-sided exact McNemar p-value of the discordant worlds."""

    @property
    def new_is_better(self) -> bool:
        """More worlds solved by the new controller alone than by the old one alone (on the same worlds)."""
        return self.only_new > self.only_old

    def text(self) -> str:
        return (f"paired on {self.worlds} worlds: {self.only_new} solved only by the new, {self.only_old} only by "
                f"the old (exact McNemar p={self.p_value:.2g})")


def paired(new: Sequence[bool], old: Sequence[bool]) -> Paired:
    """The paired comparison of two controllers' per-world successes (world i of each is the same world)."""
    n = min(len(new), len(old))
    only_new = sum(1 for a, b in zip(new[:n], old[:n], strict=True) if a and not b)
    only_old = sum(1 for a, b in zip(new[:n], old[:n], strict=True) if b and not a)
    return Paired(n, only_new, only_old, exact_mcnemar_p(only_new, only_old))
