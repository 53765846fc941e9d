"""bench-diamond-rules' section and plot, computed from its saved results alone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.common import machine_line, markdown_table, save_plot
from benchmarks.crafter.diamond import macro_label
from benchmarks.crafter.diamond_results import end_kind, p_text, paired

SECTION_TITLE = ("## collect_diamond with a kept plan: the fast agent's macro actions used by fixed rules "
                 "(make bench-diamond-rules)")
FIGURE = Path("docs/figures/diamond_rules.png")


def _ends(result: dict[str, Any]) -> str:
    kinds = Counter(end_kind(e) for e in result["ends"] if not e["success"])
    return ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())


def _verdict(rule: str, result: dict[str, Any], chain: dict[str, Any]) -> str:
    only_rule, only_chain, p = paired(result, chain)
    diff = 100 * (result["success_rate"] - chain["success_rate"])
    where = "above" if diff > 0 else "below" if diff < 0 else "equal to"
    text = (f"`{rule}`: {100 * result['success_rate']:.1f}%, " + (f"{abs(diff):.1f} points {where}" if diff else where)
            + f" the chain alone; it won {only_rule} worlds the chain lost and lost {only_chain} the chain won "
            f"(exact McNemar, {p_text(p)}" + ("; within chance)." if p >= 0.05 else "; beyond chance)."))
    return text


def section_title(results: dict[str, Any]) -> str:
    """A tagged run (another answer's macro actions) has a section of its own."""
    return f"{SECTION_TITLE}, run {results['tag']}" if results.get("tag") else SECTION_TITLE


def render_section(results: dict[str, Any], plot: str | None, title: str = SECTION_TITLE) -> str:
    r = results["run"]
    chain = r["results"]["chain"]
    episodes = chain["episodes"]
    rows = []
    for rule, result in r["results"].items():
        only_rule, only_chain, p = paired(result, chain) if rule != "chain" else (0, 0, 1.0)
        rows.append([f"`{rule}`", r["rules"][rule], f"{100 * result['success_rate']:.1f}%",
                     "-" if rule == "chain" else f"{only_rule} / {only_chain} ({p_text(p)})",
                     f"{sum(e['steps'] for e in result['ends']) / max(1, len(result['ends'])):.0f}", _ends(result)])
    tools = r["tools"]
    lines = [
        title, "",
        machine_line(results["date_utc"], results["machine"], ("crafter",))
        + f". The plan: the last plan of `{Path(r['run']).name}` ({r['llm']}); its macro actions: the fast agent's "
        f"answer for RL around the plan (`{results['answer']}`: "
        f"{', '.join(map(macro_label, r['macro_actions']))}), written by "
        f"{results['answer_llm']}. No policy: each rule below decides, from what a policy would see (the "
        f"observation vector by Describe's labels, and what each step returns), when to use them "
        f"(fight: `{tools['fight']}`, shelter: `{tools['shelter']}`, sword: `{tools['sword']}`); the plan's and the "
        f"macros' actions run K={r['k']} frames, a plan action handing control back when the player is hurt or a "
        f"threat is {r.get('threat_within', 3)} cells away or closer. All rules play the same {episodes} held-out "
        "worlds bench-diamond scores on (the learner's evaluation seeds).", "",
        "This probes the actions, not the learning: a rule that clearly beats the chain alone is something APPO "
        "around the plan could have learned with the same actions; rules that do not, say those actions are the "
        "limit.", "",
        *markdown_table(["rule", "what it does", "collect_diamond", "worlds won / lost vs the chain",
                         "mean frames", "how failed episodes ended"], rows, "llrrrl"), "",
    ]
    lines += [_verdict(rule, result, chain) for rule, result in r["results"].items() if rule != "chain"]
    best = max((rule for rule in r["results"] if rule != "chain"), key=lambda x: r["results"][x]["success_rate"],
               default=None)
    if best is not None:
        _, _, p = paired(r["results"][best], chain)
        beaten = r["results"][best]["success_rate"] > chain["success_rate"] and p < 0.05
        lines += ["", f"The best rule, `{best}`, " + ("beats the chain alone beyond chance." if beaten else
                                                        "does not beat the chain alone beyond chance.")]
        worse = [rule for rule, result in r["results"].items() if rule != "chain"
                 and result["success_rate"] < chain["success_rate"] and paired(result, chain)[2] < 0.05]
        if worse:
            lines[-1] += (f" Below it beyond chance: {', '.join(f'`{rule}`' for rule in worse)}.")
    if plot:
        lines += ["", f"![fixed rules around the kept plan]({plot})"]
    return "\n".join(lines) + "\n"


def plot_rules(results: dict[str, Any], path: Path = FIGURE) -> Path:
    """Success per rule with a 95% Wilson interval, the chain alone's level drawn across."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = results["run"]
    names = list(r["results"])
    rates, lows, highs = [], [], []
    for name in names:
        n, p = r["results"][name]["episodes"], r["results"][name]["success_rate"]
        z = 1.96
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        rates.append(100 * p)
        lows.append(100 * (p - (centre - half)))
        highs.append(100 * ((centre + half) - p))
    fig, ax = plt.subplots(figsize=(8, 4))
    colors = ["#555555" if name == "chain" else "#4477aa" for name in names]
    ax.bar(names, rates, yerr=[lows, highs], capsize=4, color=colors)
    ax.axhline(rates[names.index("chain")], color="#555555", linestyle="--", linewidth=1, label="the chain alone")
    ax.set_ylabel("collect_diamond (% of held-out worlds)")
    episodes = r["results"]["chain"]["episodes"]
    run = f" (run {results['tag']})" if results.get("tag") else ""
    ax.set_title(f"Fixed rules with the fast agent's macro actions{run}, {episodes} worlds (95% intervals)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right")
    return save_plot(fig, path)
