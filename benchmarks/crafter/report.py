"""bench-crafter's section of BENCHMARKS.md and its plot, built only from the saved results."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks.common import machine_line, markdown_table

SECTION_TITLE = "## Crafter benchmark: 22 achievements and the score (make bench-crafter)"
PUBLISHED_SCORES = {"random": 1.6, "PPO": 4.6, "DreamerV2": 10.0, "DreamerV3": 14.5,
                    "SPRING (GPT-4, no training)": 27.3, "human experts": 50.5}
"""Published Crafter scores at 1M frames (Hafner 2021; Hafner et al. 2023; Wu et al. 2023), quoted for comparison."""
LABELS = {"appo": "APPO, primitives", "reference-skills": "APPO + reference skills",
          "library-skills": "APPO + an RL-GPT run's skills"}


def fmt_rate(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}%"


def budget_cell(run: dict[str, Any]) -> str:
    reached = f"{run['frames']:,} of {run['budget']:,}"
    return reached if run["complete"] else f"{reached} (partial)"


def render_section(results: dict[str, Any], plot: str | None) -> str:
    runs = [results["variants"][v] for v in results["variants"]]
    m, st = results["machine"], results["settings"]
    lines = [
        SECTION_TITLE, "",
        machine_line(results["date_utc"], m, ("torch", "sample-factory", "crafter"))
        + f". Settings: Sample Factory APPO on the whole game (no success condition ends an episode) with "
        f"Crafter's own reward (the env's `native` term: +1 per achievement unlocked in an episode, the health "
        f"term), episodes of up to {st['episode_length']:,} frames, {st['num_workers']} rollout workers x "
        f"{st['envs_per_worker']} envs, each worker's session on its own env server (2 `rlgpt serve env`); seed "
        f"{st['seed']}. As Crafter's protocol counts them, the success rates are over every training episode that "
        "ended within the budget, and the score is exp(mean(ln(1 + s_i))) - 1 (`rlgpt/game_score.py`, "
        "equal to Crafter's own analysis code on its recorded human episodes in the tests). A run that did not "
        "reach its budget is marked partial: its numbers are those of the frames reached.", "",
    ]
    rows = [(LABELS.get(r["variant"], r["variant"]), ", ".join(r["skills"]) or "-", budget_cell(r), r["episodes"],
             "-" if math.isnan(r["score"]) else f"{r['score']:.1f}",
             "-" if r["mean_return"] is None else f"{r['mean_return']:.2f}",
             "-" if r["mean_length"] is None else f"{r['mean_length']:,.0f}",
             f"{r.get('train_s', r['wall_s']) / 60:.0f}")
            for r in runs]
    lines += markdown_table(("variant", "skills", "frames", "episodes", "score", "mean return",
                             "mean episode frames", "training min"), rows)
    achievements = runs[0]["achievements"] if runs else []
    lines += ["", *markdown_table(("achievement", *(LABELS.get(r["variant"], r["variant"]) for r in runs)),
                                  [(name, *(fmt_rate(r["rates"].get(name)) for r in runs)) for name in achievements])]
    published = ", ".join(f"{name} {score}" for name, score in PUBLISHED_SCORES.items())
    lines.append("")
    dated = [(LABELS.get(r["variant"], r["variant"]), r["date_utc"]) for r in runs if r.get("date_utc")]
    if len({date for _, date in dated}) > 1:
        lines.append("Trained from: " + "; ".join(f"{label} {date}" for label, date in dated) + ".")
    for r in runs:
        if r.get("library"):
            lines.append(f"{LABELS['library-skills']}: the skills of `{r['library']}`"
                         + (f", written by {r['library_llm']}" if r.get("library_llm") else "") + ".")
    for r in runs:
        held = r.get("held_out")
        if held:
            lines.append(f"{LABELS.get(r['variant'], r['variant'])} on {held['episodes']} held-out worlds (seeds from "
                         f"{held['first_seed']:,}, never trained on), the trained policy sampling its actions: score "
                         f"{held['score']:.1f}.")
    lines += ["", f"Published scores at 1M frames, for comparison: {published}."]
    for r in runs:
        never = [name for name in achievements if r["rates"].get(name) == 0.0]
        lines.append(f"{LABELS.get(r['variant'], r['variant'])}: score {r['score']:.1f} over {r['episodes']} "
                     f"episodes; {len(achievements) - len(never)} of {len(achievements)} achievements unlocked at "
                     f"least once" + (f" (never: {', '.join(never)})" if never else "") + ".")
    if plot:
        lines += ["", f"![Crafter success rates]({plot})"]
    return "\n".join(lines) + "\n"


def plot_rates(results: dict[str, Any], path: Path) -> Path:
    """One group of bars per achievement, one bar per variant; log scale as in Crafter's own plots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from benchmarks.common import save_plot

    runs = list(results["variants"].values())
    names = runs[0]["achievements"]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / max(len(runs), 1)
    x = np.arange(len(names))
    rates = [r for run in runs for r in run["rates"].values() if r > 0]
    # A decade below the rarest unlocked achievement, so that every nonzero rate shows a bar.
    floor = min(0.1, 10 ** (np.floor(np.log10(min(rates))) - 1)) if rates else 0.1
    for k, run in enumerate(runs):
        values = np.array([max(run["rates"].get(n, 0.0), 0.0) for n in names])
        label = f"{LABELS.get(run['variant'], run['variant'])} (score {run['score']:.1f}"
        label += ")" if run["complete"] else f", partial: {run['frames']:,} frames)"
        bars = ax.bar(x + k * width, np.maximum(values, floor), width, label=label)
        zero = values == 0  # 0% has no height on a log axis: a hollow marker at the floor says "never"
        ax.scatter((x + k * width)[zero], np.full(zero.sum(), floor * 1.3), marker="o", s=14,
                   facecolors="none", edgecolors=bars.patches[0].get_facecolor() if bars.patches else "k")
    ax.set_yscale("log")
    ax.set_ylim(floor, 100)
    ax.set_ylabel("success rate (%), log; o = 0%")
    ax.set_xticks(x + width * (len(runs) - 1) / 2, [n.replace("_", " ") for n in names], rotation=60, ha="right")
    ax.set_title("Crafter: share of training episodes that unlocked each achievement", pad=28)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(runs), fontsize=8, frameon=False)
    return save_plot(fig, path)
