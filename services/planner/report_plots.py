"""The run report's plots: sub-task learning curves (curves.png), and tokens and whole-task success per outer
iteration with 95% intervals (iterations.png)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: reports are written on servers and in CI
import matplotlib.pyplot as plt

from services.planner.report_evaluations import evaluation_counts, evaluation_interval
from services.planner.state import RunState


def plot_subtask_curves(state: RunState, path: Path) -> Path:
    """Success rate vs env frames: training curves of RL sub-tasks, test results of coded attempts."""
    fig, ax = plt.subplots(figsize=(11, 4.5))
    for name, sub in state.subtasks.items():
        trainings: dict[str, list[dict[str, float]]] = {}
        for point in sub.curve:
            trainings.setdefault(str(point.get("job_id", "")), []).append(point)
        for k, points in enumerate(trainings.values(), 1):
            # Numbered per sub-task: two inner attempts of one outer iteration are two trainings.
            label = f"{name} (RL training {k}, outer iteration {points[0].get('iteration', 0)})"
            frames = [p["env_frames"] for p in points]
            [line] = ax.plot(frames, [p["success_rate"] for p in points], label=label)
            if any("skill_frame_fraction" in p for p in points):  # how much of the training the skills played
                ax.plot(frames, [p.get("skill_frame_fraction", 0.0) for p in points], linestyle=":",
                        color=line.get_color(), label=f"{name}: training {k}'s share of frames inside coded skills")
        if sub.tests:
            coded = sub.decision == "code"
            ax.scatter([t.get("frames", 0) for t in sub.tests], [t.get("success_rate", 0.0) for t in sub.tests],
                       marker="o" if coded else "s", label=f"{name} ({'code tests' if coded else 'evaluations'})")
    ax.set_xlabel("env frames spent on the sub-task")
    ax.set_ylabel("success rate (dotted: share of frames in skills)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Sub-tasks: success rate vs env frames")
    if ax.get_legend_handles_labels()[0]:  # beside the axes: inside, it hid the last evaluations
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _tick(label: str, record: dict | None) -> str:
    counts = evaluation_counts(record)
    return f"{label}\n{counts[0]}/{counts[1]}" if counts else label


def plot_iterations(state: RunState, path: Path, target: float | None = None) -> Path:
    """Tokens per outer iteration, and the whole task's success after each iteration and at the end, each with
    its Wilson 95% interval as an error bar; ``target``: the run's target success, a dashed line when known."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), width_ratios=(2, 3))
    iterations = [int(i["iteration"]) for i in state.iterations]
    left.bar(iterations, [i["tokens"] for i in state.iterations], color="tab:blue")
    left.set_xticks(iterations)  # whole iterations only
    left.set_xlabel("outer iteration")
    left.set_ylabel("LLM tokens")
    left.set_title("Tokens per iteration")
    if any((record or {}).get("score") is not None for record in [*state.iterations, state.final]):
        _game_scores(right, state, target)  # a game task's measure is its score, not a success rate
    else:
        _success_rates(right, state, iterations, target)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _target_line(ax: Any, y: float, label: str) -> None:
    """The run's target as a dashed line, named outside the axes at the right edge: inside, a label could hide a
    bar's value."""
    ax.axhline(y, color="tab:red", linestyle="--", linewidth=1)
    ax.text(1.01, y, f"target\n{label}", transform=ax.get_yaxis_transform(), ha="left", va="center",
            color="tab:red", fontsize=8, clip_on=False)


def _success_rates(right: Any, state: RunState, iterations: list[int], target: float | None) -> None:
    """The whole task's success after each iteration and at the end, with Wilson 95% intervals as error bars."""
    records = [*state.iterations, state.final]
    labels = [_tick(f"iter {i}", it) for i, it in zip(iterations, state.iterations, strict=True)]
    labels.append(_tick("final", state.final))
    intervals = [evaluation_interval(record) for record in records]
    positions = list(range(len(labels)))
    colors = ["tab:olive"] * len(iterations) + ["tab:green"]
    right.bar(positions, [iv[0] if iv else 0.0 for iv in intervals], color=colors, alpha=0.8)
    shown = [(x, iv) for x, iv in zip(positions, intervals, strict=True) if iv is not None]
    if shown:
        right.errorbar([x for x, _ in shown], [iv[0] for _, iv in shown],
                       yerr=[[iv[0] - iv[1] for _, iv in shown], [iv[2] - iv[0] for _, iv in shown]],
                       fmt="none", ecolor="black", elinewidth=1.2, capsize=6)
    for x, interval in zip(positions, intervals, strict=True):
        # Written above its interval with a marker, so a 0% result shows as such, not as an empty slot.
        if interval is None:  # not evaluated: no marker, a grey note
            right.annotate("n/a", (x, 0.0), xytext=(0, 6), textcoords="offset points", ha="center", color="grey")
            continue
        rate, _, high = interval
        right.plot([x], [rate], marker="o", color="black", markersize=4)
        right.annotate(f"{rate:.0%}", (x, high), xytext=(0, 4), textcoords="offset points", ha="center",
                       fontsize=10, fontweight="bold")
    if target is not None:
        _target_line(right, target, f"{target:.0%}")
    right.set_xticks(positions, labels)
    right.set_xlim(-0.6, len(positions) - 0.4)
    right.set_ylim(0, 1.18)
    right.set_ylabel("whole-task success rate")
    right.set_title("Whole-task success (bars: 95% Wilson intervals)")


def _game_scores(ax: Any, state: RunState, target: float | None) -> None:
    """A game task's score (0-100, rlgpt/game_score.py) after each iteration, for each policy trained after them
    and in the final evaluation; ``target``: the run's target as a fraction of 100."""
    bars = [(f"iter {int(it['iteration'])}", it.get("score"), "tab:olive") for it in state.iterations]
    bars += [(name, (record or {}).get("score"), "tab:purple") for name, record in
             (("macro-action\npolicy", state.game_controller), ("kept-plan\npolicy", state.kept_plan)) if record]
    bars.append(("final", (state.final or {}).get("score"), "tab:green"))
    for x, (_, score, color) in enumerate(bars):
        if score is None:
            ax.annotate("n/a", (x, 0.0), xytext=(0, 6), textcoords="offset points", ha="center", color="grey")
            continue
        ax.bar([x], [float(score)], color=color, alpha=0.8)
        ax.annotate(f"{float(score):.1f}", (x, float(score)), xytext=(0, 4), textcoords="offset points",
                    ha="center", fontsize=10, fontweight="bold")
    top = max([float(s) for _, s, _ in bars if s is not None] + [100.0 * (target or 0.0), 1.0])
    if target is not None:
        _target_line(ax, 100.0 * target, f"{100.0 * target:.1f}")
    ax.set_xticks(range(len(bars)), [label for label, _, _ in bars])
    ax.set_xlim(-0.6, len(bars) - 0.4)
    ax.set_ylim(0, top * 1.18)
    ax.set_ylabel("the game's score (0-100)")
    ax.set_title("The game's score per evaluation")
