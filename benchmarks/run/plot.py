"""bench-run's figure: per seed, the whole task's success after each outer iteration and at the end, with 95%
Wilson intervals, and the runs' target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import save_plot
from benchmarks.run.report import FIGURE
from rlgpt.stats import wilson_interval

OFFSET = 0.08
"""Horizontal shift between seeds, so their error bars do not hide each other."""


def _point(evaluation: dict[str, Any]) -> tuple[float, float, float]:
    """Rate and the distances down and up to its interval's ends, in percent."""
    k, n = evaluation["count"], evaluation["episodes"]
    low, high = wilson_interval(k, n)
    rate = k / n
    return 100 * rate, 100 * (rate - low), 100 * (high - rate)


def plot_runs(results: dict[str, Any], path: Path = FIGURE) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    width = max((len(r.get("iterations", [])) for r in runs), default=0)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for index, run in enumerate(runs):
        shift = (index - (len(runs) - 1) / 2) * OFFSET
        points = [(i, it["evaluation"]) for i, it in enumerate(run.get("iterations", [])) if it["evaluation"]]
        if run.get("final") and run["final"].get("episodes"):
            points.append((width, run["final"]))
        if not points:
            continue
        xs = [x + shift for x, _ in points]
        values = [_point(e) for _, e in points]
        line = ax.errorbar(xs, [v[0] for v in values], yerr=[[v[1] for v in values], [v[2] for v in values]],
                           marker="o", capsize=3, label=f"seed {run['seed']}")
        if points[-1][0] == width:  # the final evaluation stands apart from the iterations' line
            ax.plot(xs[-1], values[-1][0], marker="*", markersize=14, color=line[0].get_color())
    targets = {r["budgets"]["target_success"] for r in runs if r.get("budgets")}
    for target in targets:
        ax.axhline(100 * target, color="#555555", linestyle="--", linewidth=1, label=f"target {target:.0%}")
    ax.axvline(width - 0.5, color="#bbbbbb", linewidth=0.8)
    ax.set_xticks(range(width + 1), [f"iter {i}" for i in range(width)] + ["final"])
    ax.set_ylim(-3, 103)
    ax.set_ylabel("whole-task success (%)")
    ax.set_title(f"make run on {len(runs)} seeds: the whole task after each outer iteration and at the end "
                 "(95% intervals)", fontsize=10)
    ax.legend(loc="best", fontsize=8, title="star: final", title_fontsize=8)
    return save_plot(fig, path)
