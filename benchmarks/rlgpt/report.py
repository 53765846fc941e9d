"""bench-rlgpt's section of BENCHMARKS.md and its plot, built only from the saved results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import fmt_pct, joined, markdown_table, save_plot

TITLE = "## RL-GPT vs pure RL vs pure code (make bench-rlgpt)"
REFERENCE_MODE = "rl+reference-skills"
FIGURE = "rlgpt_modes.png"


def ranking(task: str, runs: list[dict[str, Any]]) -> str:
    """Which modes reached the highest final success on ``task``, which none, and which trained to a success first."""
    best = max(r["success_rate"] for r in runs)
    leaders = [r["mode"] for r in runs if r["success_rate"] == best]
    text = (f"On `{task}`, no mode succeeded in the final evaluation" if best == 0 else
            f"On `{task}`, the highest final success was {fmt_pct(best)} ({joined([f'`{m}`' for m in leaders])})")
    zero = [r["mode"] for r in runs if r["success_rate"] == 0]
    if best > 0 and zero:
        text += f"; {joined([f'`{m}`' for m in zero])} reached 0%"
    trained = [r for r in runs if r["frames_to_first_training_success"] is not None]
    if trained:
        first = min(trained, key=lambda r: r["frames_to_first_training_success"])
        text += (f"; of the modes whose training succeeded at all, `{first['mode']}` got there in the fewest training "
                 f"frames ({first['frames_to_first_training_success']:,})")
    return text + "."


def plot(results: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    modes = list(dict.fromkeys(r["mode"] for r in runs))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(modes))
    for j, mode in enumerate(modes):
        ax.bar([i + j * width for i in range(len(tasks))],
               [next((r["success_rate"] for r in runs if r["task"] == t and r["mode"] == mode), 0.0) for t in tasks],
               width, label=mode)
    ax.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(tasks))], tasks)
    ax.set_ylabel("final success rate")
    ax.set_ylim(0, 1)
    ax.set_title(f"Same budget: {results['settings']['frames']} env frames per run")
    ax.legend()
    return save_plot(fig, path)


def render_section(results: dict[str, Any], figure: Path | None = None) -> str:
    """The section; with ``figure`` (a path next to the markdown file's figures/) the plot is drawn and linked."""
    st, runs = results["settings"], results["runs"]
    rows = [(r["task"], r["mode"], fmt_pct(r["success_rate"]),
             f"{r['frames_to_first_training_success']:,}" if r["frames_to_first_training_success"] is not None else "-",
             f"{r['training_frames']:,}", f"{r.get('skill_test_frames', 0):,}", r["tokens"],
             f"error: {r['error'][:60]}" if r["error"] else r["plan"] or "-", r.get("controller") or "-")
            for r in runs]
    lines = [TITLE, "",
             f"Measured {results['date_utc']} on {results['machine']}; LLM: {results['llm']}; budget {st['frames']} "
             f"env frames per run (skill tests and training; the final evaluation of {st['eval_episodes']} "
             f"whole-task episodes is not counted); O={st['outer']}, I={st['inner']}; "
             f"{results['total_seconds'] / 60:.0f} min in all.", "",
             *markdown_table(("task", "mode", "final success", "training frames to first success", "training frames",
                              "skill-test frames", "LLM tokens", "last plan (or error)", "final controller"), rows,
                             "llrrrrrll"), "",
             "All numbers come from the planner's `WatchRun` events: the final success and controller from `run_end`, "
             "tokens from the `llm` events, training frames from the last `training` progress of each job, skill-test "
             "frames from the `code` events, the last plan from the last `plan` "
             f"event. `{REFERENCE_MODE}` has no planner run: its numbers come from the learner's `WatchJob` and "
             "`Evaluate`.", "",
             "Modes: `pure-rl` trains on the whole task with primitive actions only (no LLM); `pure-code` has the "
             "fast agent write a skill per sub-task and runs their chain; `rl-gpt` is the two loops (slow agent "
             "decides code or RL, coded skills join the RL action space); "
             f"`{REFERENCE_MODE}` is pure RL's training with the hand-written reference skills "
             f"({', '.join(results['reference_skills'])}) as macro actions.", ""]
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    lines += [" ".join(ranking(task, [r for r in runs if r["task"] == task]) for task in tasks), ""]
    if figure is not None:
        plot(results, figure)
        lines += [f"![success by mode](figures/{figure.name})", ""]
    return "\n".join(lines)
