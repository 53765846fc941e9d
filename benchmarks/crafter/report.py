"""The Crafter section of BENCHMARKS.md and its achievements plot, from raw files alone: bench-crafter's APPO rows
(docs/bench-raw/crafter/results.json, per training episode and per held-out episode) and bench-game's RL-GPT rows
(docs/bench-raw/game/*/results.json, benchmarks/game/report.py). Every score and rate is computed here from the
per-episode data by rlgpt/game_score.py; a row whose per-episode data is not on disk shows no number and says so.
Held-out rows that played the same worlds are compared world by world (benchmarks/crafter/paired.py).

:func:`crafter_section` and :func:`plot_achievements` are what a registry of sections calls."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks.common import machine_line, markdown_table
from benchmarks.crafter.paired import Evaluation, evaluation, interval_lines, paired_lines
from benchmarks.game.report import game_evaluations, game_lines, game_series
from rlgpt.game_score import crafter_score, success_rates, within_budget

SECTION_TITLE = "## Crafter benchmark: 22 achievements and the score (make bench-crafter)"
PUBLISHED_SCORES = {"random": 1.6, "PPO": 4.6, "DreamerV2": 10.0, "DreamerV3": 14.5,
                    "SPRING (GPT-4, no training)": 27.3, "human experts": 50.5}
"""Published Crafter scores at 1M frames (Hafner 2021; Hafner et al. 2023; Wu et al. 2023), quoted for comparison."""
LABELS = {"appo": "APPO, primitives", "reference-skills": "APPO + reference skills",
          "library-skills": "APPO + an RL-GPT run's skills"}
NO_APPO_DATA = (
    "**APPO rows: no per-episode data on disk.** The three APPO rows measured on 2026-11-25 (primitives; the "
    "reference skills; an RL-GPT run's skills) never had their raw results committed and "
    "none are on this machine, so they cannot be recomputed: they are frozen history in "
    "`docs/benchmarks/frozen.md`, not results. `make bench-crafter` measures them again and saves every training "
    "and held-out episode in `docs/bench-raw/crafter/results.json`, from which these rows are then computed. Its "
    "held-out evaluation (`--eval-episodes N --eval-set K`, default set 0) plays the worlds of bench-game's set K of "
    "a run with the same seed, so that its rows and RL-GPT's pair world by world.")


def fmt_rate(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}%"


def label_of(run: dict[str, Any]) -> str:
    return LABELS.get(run["variant"], run["variant"])


def budget_cell(run: dict[str, Any]) -> str:
    reached = f"{run['frames']:,} of {run['budget']:,}"
    return reached if run["complete"] else f"{reached} (partial)"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def variant_numbers(run: dict[str, Any]) -> dict[str, Any] | None:
    """A variant's numbers from its training episodes that ended within its budget (Crafter's protocol): episodes,
    rates, score, mean return and frames; None when its raw results hold no per-episode data."""
    if not isinstance(run.get("episodes"), list):
        return None
    kept = within_budget(run["episodes"], run["budget"])
    rates = success_rates([e["achievements"] for e in kept], run["achievements"])
    return {"episodes": len(kept), "rates": rates, "score": crafter_score(rates),
            "mean_return": _mean([float(e["return"]) for e in kept]),
            "mean_length": _mean([float(e["frames"]) for e in kept])}


def held_out_numbers(run: dict[str, Any]) -> dict[str, Any] | None:
    """The trained policy's held-out episodes: how many, from which world, which of bench-game's sets of a run with
    which seed (None when not recorded), score; None without per-episode data."""
    held = run.get("held_out") or {}
    if not isinstance(held.get("episodes"), list):
        return None
    rates = success_rates([e["achievements"] for e in held["episodes"]], run["achievements"])
    return {"episodes": len(held["episodes"]), "first_seed": held["first_seed"], "set": held.get("set"),
            "run_seed": held.get("run_seed"), "score": crafter_score(rates)}


def held_out_label(run: dict[str, Any]) -> str:
    return f"{label_of(run)}, held-out"


def appo_evaluations(results: dict[str, Any] | None) -> list[Evaluation]:
    """Each variant's held-out episodes, for the section's paired comparisons."""
    return [evaluation(held_out_label(r), r["achievements"], r["held_out"]["episodes"])
            for r in (results or {}).get("variants", {}).values() if held_out_numbers(r) is not None]


def appo_lines(results: dict[str, Any]) -> list[str]:
    """bench-crafter's rows: settings, a row per variant with per-episode data, a sentence for each without."""
    runs = list(results["variants"].values())
    m, st = results["machine"], results["settings"]
    lines = [
        machine_line(results["date_utc"], m, ("torch", "sample-factory", "crafter"))
        + f". Settings: Sample Factory APPO on the whole game (no success condition ends an episode) with "
        f"Crafter's own reward (the env's `native` term: +1 per achievement unlocked in an episode, the health "
        f"term), episodes of up to {st['episode_length']:,} frames, {st['num_workers']} rollout workers x "
        f"{st['envs_per_worker']} envs, each worker's session on its own env server (2 `rlgpt serve env`); seed "
        f"{st['seed']}. As Crafter's protocol counts them, the success rates are over every training episode that "
        "ended within the budget (each kept in the raw results), and the score is exp(mean(ln(1 + s_i))) - 1 "
        "(`rlgpt/game_score.py`, equal to Crafter's own analysis code on its recorded human episodes in the tests). "
        "A run that did not reach its budget is marked partial: its numbers are those of the frames reached.", ""]
    rows = []
    for r in runs:
        if (n := variant_numbers(r)) is not None:
            rows.append((label_of(r), ", ".join(r["skills"]) or "-", budget_cell(r), n["episodes"],
                         "-" if math.isnan(n["score"]) else f"{n['score']:.1f}",
                         "-" if math.isnan(n["mean_return"]) else f"{n['mean_return']:.2f}",
                         "-" if math.isnan(n["mean_length"]) else f"{n['mean_length']:,.0f}",
                         f"{r.get('train_s', r['wall_s']) / 60:.0f}"))
    lines += markdown_table(("variant", "skills", "frames", "episodes", "score", "mean return",
                             "mean episode frames", "training min"), rows) if rows else []
    lines += [f"{label_of(r)}: its per-episode data is not on disk (raw results saved before they kept it), so no "
              f"number of it is shown; `make bench-crafter BENCH_CRAFTER_ARGS=\"--variants {r['variant']}\"` "
              "measures it again." for r in runs if variant_numbers(r) is None]
    dated = [(label_of(r), r["date_utc"]) for r in runs if r.get("date_utc")]
    if len({date for _, date in dated}) > 1:
        lines.append("Trained from: " + "; ".join(f"{name} {date}" for name, date in dated) + ".")
    for r in runs:
        if r.get("library"):
            lines.append(f"{LABELS['library-skills']}: the skills of `{r['library']}`"
                         + (f", written by {r['library_llm']}" if r.get("library_llm") else "") + ".")
        if held := held_out_numbers(r):
            first, last = held["first_seed"], held["first_seed"] + held["episodes"] - 1
            seed = results["settings"]["seed"] if held["run_seed"] is None else held["run_seed"]
            where = f"bench-game's set {held['set']} of a seed-{seed} run, " if held["set"] is not None else ""
            lines.append(f"{held_out_label(r)}: {held['episodes']} worlds ({first:,}..{last:,}, {where}never "
                         f"trained on), the trained policy sampling its actions: score {held['score']:.1f}.")
    return lines


def appo_series(results: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each bench-crafter variant with per-episode data as a series of the table and the plot."""
    series = []
    for r in (results or {}).get("variants", {}).values():
        if (n := variant_numbers(r)) is not None:
            note = "" if r["complete"] else f"partial: {r['frames']:,} frames"
            series.append({"label": label_of(r), "rates": n["rates"], "score": n["score"], "note": note})
    return series


def crafter_section(results: dict[str, Any] | None, game_docs: list[dict[str, Any]], plot: str | None) -> str:
    """The whole Crafter section: bench-crafter's rows (``results``, None: not on disk), bench-game's (its raw
    files' documents), every achievement's rate per row, the published scores, the plot's link."""
    held = appo_evaluations(results) + game_evaluations(game_docs)
    intervals = interval_lines(held)
    lines = [SECTION_TITLE, "", *(appo_lines(results) if results else [NO_APPO_DATA]), "", *game_lines(game_docs),
             "", *([*intervals, ""] if intervals else []), *paired_lines(held)]
    series = appo_series(results) + game_series(game_docs)
    if series:
        names = list(series[0]["rates"])
        lines += ["", *markdown_table(("achievement", *(s["label"] for s in series)),
                                      [(name, *(fmt_rate(s["rates"].get(name)) for s in series)) for name in names])]
        lines += ["", "; ".join(f"{s['label']}: score {s['score']:.1f}, {sum(r > 0 for r in s['rates'].values())} "
                                f"of {len(names)} achievements unlocked at least once" for s in series) + "."]
    published = ", ".join(f"{name} {score}" for name, score in PUBLISHED_SCORES.items())
    lines += ["", f"Published scores at 1M frames, for comparison: {published}."]
    if plot and series:
        lines += ["", f"![Crafter success rates]({plot})"]
    return "\n".join(lines) + "\n"


def render_section(results: dict[str, Any], plot: str | None) -> str:
    """bench-crafter's section alone (no bench-game rows)."""
    return crafter_section(results, [], plot)


def plot_achievements(results: dict[str, Any] | None, game_docs: list[dict[str, Any]], path: Path) -> Path | None:
    """The section's plot: one group of bars per achievement, one bar per row with data; log scale as in
    Crafter's own plots. None (nothing drawn) when no row has data."""
    series = appo_series(results) + game_series(game_docs)
    return plot_series(series, path) if series else None


def plot_rates(results: dict[str, Any], path: Path) -> Path:
    """bench-crafter's rows alone."""
    return plot_series(appo_series(results), path)


def plot_series(series: list[dict[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from benchmarks.common import save_plot

    names = list(series[0]["rates"])
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(names))
    rates = [r for s in series for r in s["rates"].values() if r > 0]
    # A decade below the rarest unlocked achievement, so that every nonzero rate shows a bar.
    floor = min(0.1, 10 ** (np.floor(np.log10(min(rates))) - 1)) if rates else 0.1
    for k, s in enumerate(series):
        values = np.array([max(s["rates"].get(n, 0.0), 0.0) for n in names])
        bars = ax.bar(x + k * width, np.maximum(values, floor), width,
                      label=f"{s['label']} (score {s['score']:.1f}" + (f", {s['note']})" if s["note"] else ")"))
        zero = values == 0  # 0% has no height on a log axis: a hollow marker at the floor says "never"
        ax.scatter((x + k * width)[zero], np.full(zero.sum(), floor * 1.3), marker="o", s=14,
                   facecolors="none", edgecolors=bars.patches[0].get_facecolor() if bars.patches else "k")
    ax.set_yscale("log")
    ax.set_ylim(floor, 100)
    ax.set_ylabel("success rate (%), log; o = 0%")
    ax.set_xticks(x + width * (len(series) - 1) / 2, [n.replace("_", " ") for n in names], rotation=60, ha="right")
    columns = min(len(series), 3)
    rows = -(-len(series) // columns) if series else 1
    # The legend sits above the axes: the title clears every one of its rows.
    ax.set_title("Crafter: share of episodes that unlocked each achievement", pad=6 + 13 * rows)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=columns, fontsize=8, frameon=False)
    return save_plot(fig, path)
