"""bench-diamond's section of BENCHMARKS.md and its plot, built only from the saved results."""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.common import machine_line, markdown_table
from benchmarks.crafter.diamond import PLAN_SKILLS_RUN

SECTION_TITLE = "## collect_diamond with a kept plan: the chain alone vs APPO around it (make bench-diamond)"
CONTROLLERS = (("run", "chain", "the chain alone", "chain"),
               ("run", "policy", "APPO around the kept plan, sampling", "APPO"),
               ("run", "policy_greedy", "APPO around the kept plan, greedy", "APPO greedy"),
               ("agent", "chain", "the chain alone, at the fast agent's K", "agent's chain"),
               ("agent", "policy", "APPO with the fast agent's config, sampling", "agent APPO"),
               ("agent", "policy_greedy", "APPO with the fast agent's config, greedy", "agent APPO greedy"))
"""(variant, results key, row label, short column label); a controller missing from the results is left out.
Variant ``run``: the bench's own config; ``agent``: the config a model wrote for it (``--agent-answer``)."""
PRIOR_TITLE = ("## collect_diamond with a kept plan, the policy starting on the plan: the chain alone vs APPO "
               "around it (make bench-diamond BENCH_DIAMOND_ARGS=--plan-prior=P)")
"""The section of a run with ``--plan-prior`` (its own results, figure and section)."""
INTERRUPT_TITLE = ("## collect_diamond with a kept plan that hands control back when in trouble: the chain alone vs "
                   "APPO around it (make bench-diamond BENCH_DIAMOND_ARGS='--interrupt-damage --threat-within=N')")
"""The section of a run whose plan actions end early (``--interrupt-damage``, ``--threat-within``)."""
AGENT_TITLE = ("## collect_diamond with a kept plan and the fast agent's config: the chain alone vs APPO around it "
               "(make bench-diamond BENCH_DIAMOND_ARGS='--agent-answer FILE --tag T')")
"""The section of a run with only the fast agent's config (``--agent-answer`` under a tag with no run of the
bench's own config)."""


def interrupting(run: dict[str, Any]) -> bool:
    interrupt = run.get("interrupt") or {}
    return bool(interrupt.get("damage") or interrupt.get("threat_within"))


def section_title(results: dict[str, Any]) -> str:
    """The section a run's results belong in: interrupts, a plan prior, or the bench's own config."""
    if not results.get("run"):
        title = AGENT_TITLE
        return f"{title}, run {results['tag']}" if results.get("tag") else title
    run = results["run"]
    title = INTERRUPT_TITLE if interrupting(run) else PRIOR_TITLE if run.get("plan_prior") else SECTION_TITLE
    return f"{title}, run {results['tag']}" if results.get("tag") else title


def threat_text(run: dict[str, Any]) -> str:
    """Whether the policy saw where the nearest threat is (the env's observation vector, as the run recorded it)."""
    chosen = run.get("observe") or []
    seen = [label for label in run.get("vector_labels", ()) if label.startswith("threat/")
            and (not chosen or "threat" in chosen or label in chosen)]
    if not seen:
        return ""
    return (", the policy seeing the image and the observation vector, with the nearest threat in view and its "
            f"offset ({', '.join(seen)})")


def interrupt_text(interrupt: dict[str, Any]) -> str:
    """When the run's plan actions handed control back early, in words."""
    parts = (["the player is hurt"] if interrupt.get("damage") else []) + (
        [f"a threat ({', '.join(interrupt.get('threats', ()))}: the env's own list) is {interrupt['threat_within']} "
         "cells away or closer"]
        if interrupt.get("threat_within") else [])
    return (", a plan action handing control back before its K frames when " + " or when ".join(parts)
            + " (`RLConfig.plan_interrupt`; the plan skill is suspended and the next plan action resumes it), so "
            "that the policy acts where the plan is in trouble")
VARIANTS = (("run", "the bench's config", "APPO"), ("agent", "the fast agent's config", "APPO, agent's config"))
"""(variant, how the section names it, how the plot names it)."""


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


def paired_text(result: dict[str, Any], chain: dict[str, Any]) -> str:
    only_policy, only_chain, p = paired(result, chain)
    return (f"World by world: it succeeded in {only_policy} where the chain failed and failed in {only_chain} where "
            f"the chain succeeded (exact McNemar test, two-sided {p_text(p)}"
            + ("; a difference this size is within chance)." if p >= 0.05 else ")."))


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


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


def reward_text(terms: list[list[Any]]) -> str:
    """Reward terms as "kind [target] weight" ([kind, weight] or [kind, weight, target])."""
    return ", ".join(f"{t[0]}{' ' + t[2] if len(t) > 2 else ''} {t[1]:+g}" for t in terms)


def action_label(name: str) -> str:
    """An action as the sections name it: a macro action by its own name (no registry prefixes)."""
    return name.removeprefix("skill:").removeprefix("diamond_macro_").removeprefix("diamond_")


def decisions_text(first: dict[str, Any], last: dict[str, Any]) -> str:
    """What the policy chose in training, the first window against the last (share of its decisions per action;
    a plan or macro action is one decision however many frames it plays)."""
    if not first.get("actions") or not last.get("actions"):
        return ""
    names = sorted(set(first["actions"]) | set(last["actions"]),
                   key=lambda n: (-last["actions"].get(n, 0.0), -first["actions"].get(n, 0.0), n))
    shares = [f"{action_label(n)} {100 * first['actions'].get(n, 0.0):.0f}% -> "
              f"{100 * last['actions'].get(n, 0.0):.0f}%" for n in names]
    return (" Its decisions (share of the policy's choices, a plan or macro action one choice however many frames "
            "it plays), the first window -> the last: " + ", ".join(shares) + ".")


def render_section(results: dict[str, Any], plot: str | None, title: str = SECTION_TITLE) -> str:
    _, r = base(results)
    chain = r["chain"]
    steps = [link["name"].removeprefix("diamond_") for link in chain["links"]]
    opening = (
        machine_line(results["date_utc"] if results.get("run") else results["agent"]["date_utc"],
                     results["machine"] if results.get("run") else results["agent"]["machine"],
                     ("torch", "sample-factory", "crafter"))
        + f". The plan and its skills: the last plan of `{Path(r['run']).name}` ({len(steps)} sub-tasks, each a "
        f"skill written by {r['llm']}), read from its state.json. The chain alone: every action is the plan action.")
    if results.get("run"):
        frames_cell = f"{r['frames']:,} of {r['budget']:,} frames" + ("" if r["complete"] else " (partial)")
        opening += (
            " APPO around the kept plan (`RLConfig.plan`): the primitives "
            f"{', '.join(r['primitives'])} and the plan action (K={r['k']} frames, "
            "the suspended skill resumed by the next plan action"
            + (", even if its stage got done meanwhile, so the chain alone plays the same at any K"
               if r.get("plan_skills_run") == PLAN_SKILLS_RUN else "") + ")"
            + threat_text(r)
            + (f", the untrained policy starting on the plan action with probability {r['plan_prior']:g} "
               "(`RLConfig.plan_prior`, "
               + ("the action head's bias, its weights scaled by 0.01 so on every observation"
                  if r.get("prior_head") else "the action head's bias alone, so on average over the head's random "
                  "weights (this run predates their small start)")
               + "; otherwise about uniform), so that it begins near the chain "
               "alone and explores steps away from the plan rather than the plan's order" if r.get("plan_prior")
               else "")
            + (interrupt_text(r["interrupt"]) if interrupting(r) else "")
            + ", reward "
            + reward_text(r["reward"])
            + f", episodes of up to 10,000 frames, trained for {frames_cell} ({r['train_episodes']:,} training "
            f"episodes, {r['train_s'] / 60:.0f} min).")
    lines = [
        title, "",
        opening + f" All are scored on the same {chain['episodes']} held-out worlds "
        "(the learner's evaluation seeds, never trained on); the policy sampling its actions as in training, and "
        "greedy (its most probable action, `EvaluateRequest.greedy`).", "",
    ]
    if agent := results.get("agent"):
        a = agent["run"]
        frames_cell = f"{a['frames']:,} of {a['budget']:,} frames" + ("" if a["complete"] else " (partial)")
        macros = ", ".join(name.removeprefix("diamond_macro_") for name in a.get("macro_actions", {})) or "none"
        lines += [
            f"**The fast agent's config.** The model ({agent['llm']}) answered the planner's prompt for RL around "
            "this plan "
            "(`--agent-prompt` renders it as a run would: the plan, and how the chain alone failed on 64 briefing "
            f"worlds, seeded apart from the training and held-out ones) with K={a['k']}, the primitives "
            f"{', '.join(a['primitives'])}, its macro actions {macros}"
            + ("" if results.get("run") else threat_text(a))
            + (interrupt_text(a["interrupt"]).replace(", so that the policy acts where the plan is in trouble", "")
               if interrupting(a) else "")
            + ", and reward " + reward_text(a["reward"])
            + " (stage and success are the planner's)"
            + (f"; the policy starting on the plan action with probability {a['plan_prior']:g}, as the planner's "
               "does" if a.get("plan_prior") else "")
            + ("" if results.get("run") else ", episodes of up to 10,000 frames")
            + f". Trained for {frames_cell} ({a['train_episodes']:,} "
            f"training episodes, {a['train_s'] / 60:.0f} min, {agent['date_utc']}); the answer is "
            f"`{agent['answer']}`.", ""]
    shown = controllers(results)
    rows = []
    for label, _, result in shown:
        n = result["episodes"]
        failed = [e for e in result["ends"] if not e["success"]]
        kinds = Counter(end_kind(e) for e in failed)
        mean_frames = sum(e["steps"] for e in result["ends"]) / n if n else 0
        rows.append((label, f"{100 * result['success_rate']:.1f}%", n, f"{mean_frames:,.0f}",
                     ", ".join(f"{kind} {count}" for kind, count in kinds.most_common()) or "-"))
    lines += markdown_table(("controller", "collect_diamond", "episodes", "mean frames", "how failed episodes ended"),
                            rows)
    lines += ["", "How far the episodes got: per sub-task of the plan, the episodes that reached it (every earlier "
              "one done) and that did it; *ended here*: failed episodes whose first sub-task not done was this one.",
              ""]
    ends = [ended_in(result) for _, _, result in shown]
    table = []
    for j, name in enumerate(steps):
        cells = []
        for (_, _, result), ended in zip(shown, ends, strict=True):
            link, n = result["links"][j], result["episodes"]
            cells += [f"{pct(link['reached'], n)} / {pct(link['succeeded'], n)}", ended[link["name"]]]
        table.append((name, *cells))
    header = ["sub-task"]
    for _, short, _ in shown:
        header += [f"{short}: reached / done", f"{short}: ended here"]
    lines += markdown_table(header, table)
    lines.append("")
    for label, result, chain_label, own_chain in comparisons(results):
        diff = 100 * (result["success_rate"] - own_chain["success_rate"])
        versus = f"{abs(diff):.1f} points {'above' if diff > 0 else 'below'}" if diff else "equal to"
        same = result["ends"] == own_chain["ends"]
        lines.append(f"{label[0].upper()}{label[1:]}: collect_diamond in {100 * result['success_rate']:.1f}% of the "
                     f"held-out worlds, {versus} {chain_label} ({100 * own_chain['success_rate']:.1f}%)."
                     + (f" Its {len(own_chain['ends'])} episodes ended exactly as the chain's (same frames, same "
                        "ends)." if same else " " + paired_text(result, own_chain)))
    for name, who, _ in VARIANTS:
        if variant(results, name).get("plan_prior"):
            who += f", starting on the plan (p={variant(results, name)['plan_prior']:g})"
        curve = variant(results, name).get("curve")
        if curve:
            first, last = curve[0], curve[-1]
            lines.append(f"In training with {who}, the success rate went from {100 * first['success_rate']:.1f}% "
                         f"(the first {first['frames']:,} frames) to {100 * last['success_rate']:.1f}% (the last "
                         f"window, by {last['frames']:,} frames); deaths from {100 * first['deaths']:.0f}% to "
                         f"{100 * last['deaths']:.0f}% of episodes." + decisions_text(first, last))
    lines += [str(note) for note in r.get("notes", [])]  # what is known of the run besides its numbers
    if plot:
        lines += ["", f"![collect_diamond with a kept plan]({plot})"]
    return "\n".join(lines) + "\n"


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
    fig.suptitle(textwrap.fill(f"{r['task']}: the chain alone vs APPO around the kept plan{start}", 110))
    return save_plot(fig, path)
