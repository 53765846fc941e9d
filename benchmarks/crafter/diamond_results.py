"""bench-diamond's saved results read for its section and plot: its variants (the bench's own config, the fast
agent's), its controllers and how each compares with the chain alone world by world."""

from __future__ import annotations

import math
from typing import Any

CONTROLLERS = (("run", "chain", "the chain alone", "chain"),
               ("run", "policy", "APPO around the kept plan, sampling", "APPO"),
               ("run", "policy_greedy", "APPO around the kept plan, greedy", "APPO greedy"),
               ("agent", "chain", "the chain alone, at the fast agent's K", "agent's chain"),
               ("agent", "policy", "APPO with the fast agent's config, sampling", "agent APPO"),
               ("agent", "policy_greedy", "APPO with the fast agent's config, greedy", "agent APPO greedy"))
"""(variant, results key, row label, short column label); a controller missing from the results is left out.
Variant ``run``: the bench's own config; ``agent``: the config a model wrote for it (``--agent-answer``)."""


VARIANTS = (("run", "the bench's config", "APPO"), ("agent", "the fast agent's config", "APPO, agent's config"))
"""(variant, how the section names it, how the plot names it)."""


def interrupting(run: dict[str, Any]) -> bool:
    interrupt = run.get("interrupt") or {}
    return bool(interrupt.get("damage") or interrupt.get("threat_within"))


def variant(results: dict[str, Any], name: str) -> dict[str, Any]:
    return results.get(name) or {} if name == "run" else (results.get(name) or {}).get("run") or {}


def base(results: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The variant the section opens with (its plan, its chain alone, its K): the bench's own config, or the fast
    agent's in a run of ``--agent-answer`` alone."""
    return ("run", results["run"]) if results.get("run") else ("agent", variant(results, "agent"))


def controllers(results: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(row label, short label, its held-out result) of each controller the results have, in table order."""
    return [(label, short, variant(results, v)[key]) for v, key, label, short in CONTROLLERS
            if variant(results, v).get(key)]


def comparisons(results: dict[str, Any]) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """(label, result, its chain's label, the chain's result): each policy against the chain alone of its own
    variant (the same K, the same worlds)."""
    out = []
    for v, key, label, _ in CONTROLLERS:
        chain = variant(results, v).get("chain")
        if key != "chain" and variant(results, v).get(key) and chain:
            same_k = variant(results, v).get("k") == base(results)[1].get("k")
            out.append((label, variant(results, v)[key], "the chain alone" + ("" if same_k else " at the same K"),
                        chain))
    return out


def paired(result: dict[str, Any], chain: dict[str, Any]) -> tuple[int, int, float]:
    """(worlds only the policy won, worlds only the chain won, the exact two-sided McNemar p-value): both played
    the same worlds in the same order, so only the worlds where they differ tell them apart."""
    wins = [(bool(a["success"]), bool(b["success"])) for a, b in zip(result["ends"], chain["ends"], strict=True)]
    only_policy = sum(a and not b for a, b in wins)
    only_chain = sum(b and not a for a, b in wins)
    n, k = only_policy + only_chain, min(only_policy, only_chain)
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0
    return only_policy, only_chain, p


def p_text(p: float) -> str:
    """A p-value as the sections print it: three decimals near 0.05, so that a value just above it never reads as
    0.05."""
    return "p < 0.01" if p < 0.01 else f"p = {p:.{3 if p < 0.1 else 2}f}"


def ended_in(result: dict[str, Any]) -> dict[str, int]:
    """Failed episodes per plan step they ended in (their first step not done): reached(j) - reached(j + 1), the
    last step's done episodes being the plan's finished ones."""
    links = result["links"]
    counts = {}
    for j, link in enumerate(links):
        after = links[j + 1]["reached"] if j + 1 < len(links) else link["succeeded"]
        counts[link["name"]] = int(link["reached"]) - int(after)
    return counts


def end_kind(end: dict[str, Any]) -> str:
    """How a failed episode ended, in a few kinds: killed by creatures (zombie, skeleton arrows), worn out
    (food, drink, energy), both, the time limit, or something else."""
    if end["end_reason"] != "death":
        return end["end_reason"] or "other"
    cause = end["death_cause"]
    creatures = "zombie" in cause or "skeleton" in cause or "arrow" in cause
    needs = any(word in cause for word in ("food", "drink", "energy", "starv", "thirst"))
    return "killed and worn out" if creatures and needs else "killed" if creatures else (
        "worn out" if needs else f"died ({cause or 'unknown'})")
