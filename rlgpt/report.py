"""Run reports: markdown plus PNG plots in the run directory."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: reports are written on servers and in CI
import matplotlib.pyplot as plt


@dataclasses.dataclass
class SkillTestResult:
    """Test episodes of one skill on one task."""

    skill: str
    task: str
    successes: list[bool]
    steps: list[int]
    errors: list[str]
    sample_trajectory: str


def plot_skill_tests(results: list[SkillTestResult], path: Path) -> Path:
    """Bar chart of success rate per skill and a histogram of episode lengths."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    names = [r.skill for r in results]
    rates = [sum(r.successes) / max(1, len(r.successes)) for r in results]
    left.bar(names, rates, color="tab:green")
    left.set_ylim(0, 1)
    left.set_ylabel("success rate")
    left.set_title("Skill test episodes")
    for r in results:
        right.hist(r.steps, bins=10, alpha=0.6, label=r.skill)
    right.set_xlabel("frames per episode")
    right.set_ylabel("episodes")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_skill_report(run_dir: Path, title: str, results: list[SkillTestResult], notes: list[str]) -> Path:
    """Writes report.md and skills.png into ``run_dir``; returns the report path."""
    run_dir.mkdir(parents=True, exist_ok=True)
    plot = plot_skill_tests(results, run_dir / "skills.png")
    lines = [f"# {title}", "", *notes, "", "| skill | task | episodes | success rate | mean frames | errors |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        n = max(1, len(r.successes))
        lines.append(f"| {r.skill} | {r.task} | {len(r.successes)} | {sum(r.successes) / n:.2f} | "
                     f"{sum(r.steps) / n:.1f} | {len([e for e in r.errors if e])} |")
    lines += ["", f"![skill tests]({plot.name})", ""]
    for r in results:
        lines += [f"## {r.skill}: one episode", "", "```", r.sample_trajectory, "```", ""]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
