"""The fast agent's revision of its config for RL around the kept plan (``bench-diamond-rules --revision-prompt``):
the planner's kept-plan prompt with the agent's previous answer and how it did, measured only where no result is
scored: its training's learning curve (training worlds) and its macro actions used by the fixed rules on the
briefing worlds (seeded apart from the training and held-out worlds)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rich.progress import Progress

from benchmarks.crafter.diamond import RecordedPlan, agent_prompt
from benchmarks.crafter.diamond_results import end_kind, p_text, paired
from benchmarks.crafter.diamond_rules import RULES, run_rules
from rlgpt import worlds
from services.planner.agents.kept_plan import KeptPlanRevision
from services.planner.agents.texts import evenly

CURVE_POINTS = 6
"""Points of the previous training's learning curve shown (evenly spaced, the first and last included)."""


def training_text(trained: dict[str, Any], stages: int) -> str:
    """The previous config's training (a bench-diamond run with it: its raw results' ``run``) in words: its
    budget and its training episodes' learning curve."""
    shown = evenly(trained["curve"], CURVE_POINTS)
    lines = [f"A policy was trained with this configuration for {trained['frames']:,} frames (APPO, "
             f"{trained['train_episodes']:,} training episodes on training worlds). Its recent training episodes, "
             f"by frames trained: success rate, mean sub-tasks of the plan done (of {stages}), and the share that "
             "died:"]
    lines += [f"- {p['frames']:,}: {p['success_rate']:.1%} success, {p['stages_done']:.1f} sub-tasks, "
              f"{p['deaths']:.0%} died" for p in shown]
    return "\n".join(lines)


def _ends(result: dict[str, Any]) -> str:
    failed = [e for e in result["ends"] if not e["success"]]
    kinds = Counter(end_kind(e) for e in failed)
    causes = Counter(e["death_cause"] or "unknown" for e in failed if e["end_reason"] == "death")
    return (", ".join(f"{kind} {n}" for kind, n in kinds.most_common()) + " (death causes: "
            + ", ".join(f"{cause} {n}" for cause, n in causes.most_common(4)) + ")")


def probe_text(probe: dict[str, Any]) -> str:
    """The fixed rules' results (:func:`~benchmarks.crafter.diamond_rules.run_rules`) in words, each rule held
    world by world to the chain alone."""
    results, chain = probe["results"], probe["results"]["chain"]
    episodes = chain["episodes"]
    tools = probe["tools"]
    interrupts = " or ".join(part for part in ("hurt" if probe["hurt"] else "",
                                               f"a threat {probe['threat_within']} cells away or closer"
                                               if probe["threat_within"] else "") if part)
    lines = [f"Your macro actions were also used by fixed rules instead of a policy (no training), on {episodes} "
             "worlds seeded apart from the training worlds and from those results are scored on, with your K "
             f"({probe['k']}) and your hand-back conditions ({interrupts or 'none'}); each rule was played on the "
             "same worlds as the chain alone and is compared with it world by world (exact McNemar test). The "
             f"rules call your macro actions by name (fight: `{tools['fight']}`, shelter: `{tools['shelter']}`, "
             f"sword: `{tools['sword']}`):"]
    for rule, result in results.items():
        mean = sum(e["steps"] for e in result["ends"]) / max(1, len(result["ends"]))
        line = f"- `{rule}` ({probe['rules'][rule]}): {result['success_rate']:.1%} success"
        if rule != "chain":
            won, lost, p = paired(result, chain)
            line += f"; won {won} worlds the chain lost and lost {lost} it won ({p_text(p)})"
        lines.append(f"{line}; mean episode {mean:.0f} frames; failed episodes: {_ends(result)}.")
    lines.append("The same rules are played again with your revised macro actions: a macro action keeps its rule "
                 "by keeping its name.")
    return "\n".join(lines)


def revision_prompt(plan: RecordedPlan, answer: dict[str, Any], trained: dict[str, Any], work: Path, frames: int,
                    seed: int, episodes: int, progress: Progress) -> tuple[str, dict[str, Any]]:
    """The revision prompt, and the fixed rules' results on the briefing worlds it reports."""
    probe = run_rules(plan, answer, work, list(RULES), episodes, worlds.briefing_worlds(seed), progress)
    outcome = training_text(trained, len(plan.steps)) + "\n\n" + probe_text(probe)
    return agent_prompt(plan, work, frames, seed, episodes, KeptPlanRevision(answer, outcome)), probe
