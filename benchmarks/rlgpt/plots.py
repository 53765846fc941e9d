"""bench-rlgpt's plots, drawn from the saved results: final success per task and mode, and success after each
outer iteration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import save_plot
from benchmarks.rlgpt.runs import fmt_pct, iteration_runs, iterations, label


def plot_modes(results: dict[str, Any], path: Path) -> Path:
    """Final success per task, one bar per mode (and agent setup), its value written on it (0% shows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    series = list(dict.fromkeys(label(r) for r in runs))
    fig, ax = plt.subplots(figsize=(max(8.0, 1.6 + 0.55 * len(tasks) * len(series)), 4.2))
    width = 0.8 / max(1, len(series))
    for j, name in enumerate(series):
        xs = [i + j * width for i in range(len(tasks))]
        values = [next((r["success_rate"] for r in runs if r["task"] == t and label(r) == name), None) for t in tasks]
        # A 0% bar gets a sliver of height so that its colour shows; its label says 0%.
        bars = ax.bar([x for x, v in zip(xs, values, strict=True) if v is not None],
                      [max(v, 0.006) for v in values if v is not None], width, label=name)
        ax.bar_label(bars, labels=[fmt_pct(v) for v in values if v is not None], fontsize=7, padding=1)
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(tasks))], tasks)
    ax.set_ylabel("final success rate")
    ax.set_ylim(0, 1.1)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    ax.set_title(f"Same budget: {results['settings']['frames']:,} env frames per run")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_plot(fig, path)


def plot_iterations(results: dict[str, Any], path: Path) -> Path:
    """Success after each outer iteration: one panel per task, one line per run (mode and agent setup). Lines
    that overlap (several runs at 0%) are set slightly apart along x; a not-evaluated iteration is an x at 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    runs = iteration_runs(results["runs"])
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    names = list(dict.fromkeys(label(r) for r in runs))
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}
    markers = {name: "osD^vP*"[i % 7] for i, name in enumerate(names)}
    width = max(len(iterations(r)) for r in runs)
    # The last column holds the legend (a figure legend would be laid over the panels by tight_layout).
    fig, axes = plt.subplots(1, len(tasks) + 1, figsize=(3.6 * len(tasks) + 2.4, 4.0), squeeze=False,
                             gridspec_kw={"width_ratios": [1.0] * len(tasks) + [0.62]})
    panels, legend_ax = list(axes[0][:-1]), axes[0][-1]
    for ax, task in zip(panels, tasks, strict=True):
        task_runs = [r for r in runs if r["task"] == task]
        for j, r in enumerate(task_runs):
            dodge = (j - (len(task_runs) - 1) / 2) * min(0.08, 0.5 / len(task_runs))
            rates, name = iterations(r), label(r)
            xs = [i + dodge for i, rate in enumerate(rates) if rate is not None]
            ys = [rate for rate in rates if rate is not None]
            if xs:  # an empty line without clipping would widen the panel's bounding box to the figure's corner
                ax.plot(xs, ys, color=colors[name], marker=markers[name], markersize=7, linewidth=1.6,
                        markeredgecolor="black", markeredgewidth=0.6, clip_on=False, zorder=3)
            missing = [i + dodge for i, rate in enumerate(rates) if rate is None]
            if missing:
                ax.plot(missing, [0.0] * len(missing), linestyle="none", marker="x", markersize=8, color=colors[name],
                        clip_on=False, zorder=3)
        ax.set_title(f"{task}", fontsize=10)
        ax.set_xticks(range(width))
        ax.set_xlim(-0.5, width - 0.5)
        ax.set_xlabel("outer iteration")
        ax.set_ylim(-0.04, 1.04)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
        ax.grid(axis="y", alpha=0.3)
        if ax is not panels[0]:
            ax.tick_params(labelleft=False)
    panels[0].set_ylabel("whole-task success after the iteration")
    handles = [Line2D([], [], color=colors[n], marker=markers[n], markeredgecolor="black", markeredgewidth=0.6,
                      label=n) for n in names]
    if any(rate is None for r in runs for rate in iterations(r)):
        handles.append(Line2D([], [], color="gray", marker="x", linestyle="none", label="not evaluated"))
    legend_ax.axis("off")
    legend_ax.legend(handles=handles, fontsize=8, loc="center left", borderaxespad=0.0)
    fig.suptitle("Success per iteration (the final evaluation is in the tables)", fontsize=10)
    return save_plot(fig, path)
