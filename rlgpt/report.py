"""Run reports: markdown plus PNG plots in the run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: reports are written on servers and in CI
import matplotlib.pyplot as plt


def _load_json(path: Path) -> Any:
    import json

    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path} cannot be read ({exc}); the run directory is incomplete or corrupt") from exc


def plot_subtask_curves(state: dict[str, Any], path: Path) -> Path:
    """Success rate vs env frames: training curves of RL sub-tasks, test results of coded attempts."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, sub in state.get("subtasks", {}).items():
        trainings: dict[str, list[dict[str, Any]]] = {}
        for point in sub.get("curve") or []:
            trainings.setdefault(str(point.get("job_id", "")), []).append(point)
        for points in trainings.values():
            label = f"{name} (RL training, iteration {points[0].get('iteration', 0)})"
            ax.plot([p["env_frames"] for p in points], [p["success_rate"] for p in points], label=label)
        tests = sub.get("tests") or []
        if tests:
            ax.scatter([t.get("frames", 0) for t in tests], [t.get("success_rate", 0.0) for t in tests],
                       marker="o" if sub.get("decision") == "code" else "s",
                       label=f"{name} ({'code tests' if sub.get('decision') == 'code' else 'evaluations'})")
    ax.set_xlabel("env frames spent on the sub-task")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Sub-tasks: success rate vs env frames")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_iterations(state: dict[str, Any], path: Path) -> Path:
    """Tokens and seconds per outer iteration, and the final success rate."""
    iterations = state.get("iterations", [])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    xs = [int(i["iteration"]) for i in iterations]
    left.bar(xs, [i["tokens"] for i in iterations], color="tab:blue")
    left.set_xlabel("outer iteration")
    left.set_ylabel("LLM tokens")
    left.set_title("Tokens per iteration")
    final = state.get("final") or {}
    right.bar(["final task"], [final.get("success_rate", 0.0)], color="tab:green")
    right.set_ylim(0, 1)
    right.set_title(f"Final success over {final.get('episodes', 0)} episodes")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_run_report(run_dir: Path) -> Path:
    """Writes report.md (+ curves.png, iterations.png) from state.json, request.json and events.jsonl."""
    run_dir = Path(run_dir)
    state = _load_json(run_dir / "state.json")
    request = _load_json(run_dir / "request.json")
    task = request.get("task", {})
    final = state.get("final") or {}
    curves = plot_subtask_curves(state, run_dir / "curves.png")
    iterations_png = plot_iterations(state, run_dir / "iterations.png")
    lines = [f"# RL-GPT run: {task.get('name') or task.get('description', 'task')}", "",
             f"- mode: {request.get('mode') or 'rl-gpt'}, agents: {request.get('agents') or 'slow-fast-critic'}, "
             f"seed: {request.get('seed', 0)}",
             f"- final task success: **{final.get('success_rate', 0.0):.0%}** over {final.get('episodes', 0)} "
             f"episodes ({final.get('controller', 'not evaluated')})",
             f"- env frames spent (skill tests + training): {state.get('frames_used', 0)}", "",
             "## Sub-tasks", "", "| sub-task | decision | status | success rate | frames | attempts |",
             "|---|---|---|---:|---:|---:|"]
    for name, sub in state.get("subtasks", {}).items():
        lines.append(f"| {name} | {sub.get('decision')} | {sub.get('status')} | {sub.get('success_rate', 0):.0%} | "
                     f"{sub.get('frames', 0)} | {len(sub.get('tests', []))} |")
    lines += ["", f"![success vs frames]({curves.name})", "", "## Iterations", "",
              "| iteration | LLM tokens | seconds | env frames |", "|---:|---:|---:|---:|"]
    for it in state.get("iterations", []):
        lines.append(f"| {int(it['iteration'])} | {int(it['tokens'])} | {it['seconds']:.0f} | {int(it['frames'])} |")
    lines += ["", f"![tokens and final success]({iterations_png.name})", "", "## The plan as it evolved", ""]
    for number, plan in enumerate(state.get("plans", [])):
        steps = ", ".join(f"{s['name']} ({'code' if s.get('decision') == 'DECISION_CODE' else 'rl'})"
                          for s in plan.get("subtasks", []))
        lines.append(f"{number + 1}. {steps}" + (f" - {plan['rationale'][:200]}" if plan.get("rationale") else ""))
    lines.append("")
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
