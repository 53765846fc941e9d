"""A bench-rlgpt run's saved numbers as the section and its plots show them: its label (mode and agent setup), the
whole task's success after each outer iteration, and success rates as percentages."""

from __future__ import annotations

from typing import Any

ABLATED_MODE = "rl-gpt"
"""The mode whose runs differ by the planner's agent setup (the agent ablation)."""
NOT_EVALUATED = "n/a"
"""Shown for an iteration whose whole-task evaluation did not run."""


def fmt_pct(value: float | None) -> str:
    """'25%', '12.5%' (8 evaluation episodes give eighths: '12%' would hide the half), '-' when unknown."""
    if value is None:
        return "-"
    whole = abs(value * 100 - round(value * 100)) < 1e-4
    return f"{value:.0%}" if whole else f"{value:.1%}"


def label(run: dict[str, Any]) -> str:
    """The mode, with the agent setup for the ablated mode: ``rl-gpt (slow-fast)``."""
    agents = run.get("agents")
    return f"{run['mode']} ({agents})" if agents and run["mode"] == ABLATED_MODE else run["mode"]


def iterations(run: dict[str, Any]) -> list[float | None]:
    """The whole task's success after each outer iteration (None: not evaluated); [] where not recorded."""
    return list(run.get("iterations") or [])


def iteration_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs that recorded success per iteration (pure RL and the reference-skills mode have no iterations)."""
    return [r for r in runs if iterations(r)]
