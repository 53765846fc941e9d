"""bench-diamond's figure: training curves and how far the plan got, built only from the saved results."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from benchmarks.crafter.diamond_results import VARIANTS, base, controllers, interrupting, variant


def plot_diamond(results: dict[str, Any], path: Path) -> Path:
    """Left: training success rate and deaths per window of episodes, the chain alone's held-out rate as a line.
    Right: per sub-task, the share of held-out episodes that did it, the chain alone vs APPO."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from benchmarks.common import save_plot

    base_name, r = base(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [1, 1.4]})
    for color, (name, _, who) in zip(("C0", "C3"), VARIANTS, strict=True):
        v = variant(results, name)
        if curve := v.get("curve"):
            x = [p["frames"] / 1e6 for p in curve]
            left.plot(x, [100 * p["success_rate"] for p in curve], marker="o", ms=3, color=color,
                      label=f"{who}: collect_diamond (training episodes)")
            left.plot(x, [100 * p["deaths"] for p in curve], ls=":", color=color,
                      label=f"{who}: episodes ended by death")
        if v.get("policy"):
            left.axhline(100 * v["policy"]["success_rate"], color=color, ls="--", alpha=0.5,
                         label=f"{who} sampling, held-out ({100 * v['policy']['success_rate']:.0f}%)")
    # A variant at another K scored its own chain alone (before plan skills ran until they return, K mattered).
    other_k = [(color, v) for color, (name, _, _) in zip(("C0", "C3"), VARIANTS, strict=True)
               if name != base_name and (v := variant(results, name)).get("chain") and v.get("k") != r.get("k")]
    at_k = f" at K={r['k']}" if other_k else ""
    left.axhline(100 * r["chain"]["success_rate"], color="grey", ls="--",
                 label=f"the chain alone{at_k}, held-out ({100 * r['chain']['success_rate']:.0f}%)")
    for color, v in other_k:
        left.axhline(100 * v["chain"]["success_rate"], color=color, ls="-.", alpha=0.5,
                     label=f"the chain alone at K={v['k']}, held-out ({100 * v['chain']['success_rate']:.0f}%)")
    left.set_xlabel("env frames (millions)")
    left.set_ylabel("% of episodes")
    left.set_ylim(0, 100)
    left.legend(fontsize=7, loc="center right")
    left.set_title("training", fontsize=10)
    names = [link["name"].removeprefix("diamond_") for link in r["chain"]["links"]]
    xs = np.arange(len(names))
    shown = controllers(results)
    width = 0.8 / len(shown)
    for k, (label, _, result) in enumerate(shown):
        done = [100 * link["succeeded"] / max(1, result["episodes"]) for link in result["links"]]
        bars = right.bar(xs + (k - (len(shown) - 1) / 2) * width, done, width, label=label)
        for bar, value in zip(bars, done, strict=True):
            if value == 0:  # a bar of height 0 is invisible: mark it
                right.plot(bar.get_x() + bar.get_width() / 2, 1, marker="o", mfc="none", color=bar.get_facecolor())
    right.set_xticks(xs, [n.replace("_", " ") for n in names], rotation=40, ha="right", fontsize=8)
    right.set_ylabel("% of held-out episodes that did it (o = 0%)")
    right.set_ylim(0, 100)
    right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2)  # below: bars stay visible
    right.set_title("how far the plan got", fontsize=10)
    start = ", the fast agent's config" if base_name == "agent" else ""
    start += f", the policy starting on the plan (p={r['plan_prior']:g})" if r.get("plan_prior") else ""
    if interrupting(r):
        hand = [w for w, on in (("when hurt", r["interrupt"].get("damage")),
                                (f"a threat within {r['interrupt'].get('threat_within')}",
                                 r["interrupt"].get("threat_within"))) if on]
        start += ", control back " + " or ".join(hand)
    # Wrapped: a long title (the agent's config, a prior, interrupts) would run off the figure's edges.
    run = f" (run {results['tag']})" if results.get("tag") else ""  # which of a bench's runs: its tag
    fig.suptitle(textwrap.fill(f"{r['task']}: the chain alone vs APPO around the kept plan{start}{run}", 110))
    return save_plot(fig, path)
