"""bench-diamond's section of BENCHMARKS.md and its plot, built only from the saved results."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.common import machine_line, markdown_table

SECTION_TITLE = "## collect_diamond with a kept plan: the chain alone vs APPO around it (make bench-diamond)"
CONTROLLERS = (("chain", "the chain alone", "chain"), ("policy", "APPO around the kept plan, sampling", "APPO"),
               ("policy_greedy", "APPO around the kept plan, greedy", "APPO greedy"))
"""(results key, row label, short column label); a controller missing from the results is left out."""


def controllers(r: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [c for c in CONTROLLERS if r.get(c[0])]


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


def render_section(results: dict[str, Any], plot: str | None) -> str:
    r = results["run"]
    chain = r["chain"]
    steps = [link["name"].removeprefix("diamond_") for link in chain["links"]]
    frames_cell = f"{r['frames']:,} of {r['budget']:,} frames" + ("" if r["complete"] else " (partial)")
    lines = [
        SECTION_TITLE, "",
        machine_line(results["date_utc"], results["machine"], ("torch", "sample-factory", "crafter"))
        + f". The plan and its skills: the last plan of `{Path(r['run']).name}` ({len(steps)} sub-tasks, each a "
        f"skill written by {r['llm']}), read from its state.json. The chain alone: every action is the plan action. "
        f"APPO around the kept plan (`RLConfig.plan`): the primitives {', '.join(r['primitives'])} and the plan "
        f"action (K={r['k']} frames, "
        f"the suspended skill resumed by the next plan action), reward "
        + ", ".join(f"{kind} {weight:+g}" for kind, weight in r["reward"])
        + f", episodes of up to 10,000 frames, trained for {frames_cell} ({r['train_episodes']:,} training "
        f"episodes, {r['train_s'] / 60:.0f} min). All are scored on the same {chain['episodes']} held-out worlds "
        "(the learner's evaluation seeds, never trained on); the policy sampling its actions as in training, and "
        "greedy (its most probable action, `EvaluateRequest.greedy`).", "",
    ]
    rows = []
    for key, label, _ in controllers(r):
        result = r[key]
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
    ends = {key: ended_in(r[key]) for key, _, _ in controllers(r)}
    table = []
    for j, name in enumerate(steps):
        cells = []
        for key, _, _ in controllers(r):
            link, n = r[key]["links"][j], r[key]["episodes"]
            cells += [f"{pct(link['reached'], n)} / {pct(link['succeeded'], n)}", ends[key][link["name"]]]
        table.append((name, *cells))
    header = ["sub-task"]
    for _, _, short in controllers(r):
        header += [f"{short}: reached / done", f"{short}: ended here"]
    lines += markdown_table(header, table)
    lines.append("")
    for key, label, _ in controllers(r)[1:]:
        diff = 100 * (r[key]["success_rate"] - chain["success_rate"])
        versus = f"{abs(diff):.1f} points {'above' if diff > 0 else 'below'}" if diff else "equal to"
        same = r[key]["ends"] == chain["ends"]
        lines.append(f"{label[0].upper()}{label[1:]}: collect_diamond in {100 * r[key]['success_rate']:.1f}% of the "
                     f"held-out worlds, {versus} the chain alone ({100 * chain['success_rate']:.1f}%)."
                     + (f" Its {len(chain['ends'])} episodes ended exactly as the chain's (same frames, same ends)."
                        if same else ""))
    curve = r["curve"]
    if curve:
        first, last = curve[0], curve[-1]
        lines.append(f"In training, the success rate went from {100 * first['success_rate']:.1f}% (the first "
                     f"{first['frames']:,} frames) to {100 * last['success_rate']:.1f}% (the last window, by "
                     f"{last['frames']:,} frames); deaths from {100 * first['deaths']:.0f}% to "
                     f"{100 * last['deaths']:.0f}% of episodes.")
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

    r = results["run"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [1, 1.4]})
    curve = r["curve"]
    if curve:
        x = [p["frames"] / 1e6 for p in curve]
        left.plot(x, [100 * p["success_rate"] for p in curve], marker="o", ms=3, label="APPO around the plan: "
                  "collect_diamond (training episodes)")
        left.plot(x, [100 * p["deaths"] for p in curve], ls=":", label="APPO: episodes ended by death")
    left.axhline(100 * r["chain"]["success_rate"], color="grey", ls="--",
                 label=f"the chain alone, held-out ({100 * r['chain']['success_rate']:.0f}%)")
    left.axhline(100 * r["policy"]["success_rate"], color="C0", ls="--", alpha=0.5,
                 label=f"APPO sampling, held-out ({100 * r['policy']['success_rate']:.0f}%)")
    left.set_xlabel("env frames (millions)")
    left.set_ylabel("% of episodes")
    left.set_ylim(0, 100)
    left.legend(fontsize=7, loc="center right")
    left.set_title("training", fontsize=10)
    names = [link["name"].removeprefix("diamond_") for link in r["chain"]["links"]]
    xs = np.arange(len(names))
    shown = controllers(r)
    width = 0.8 / len(shown)
    for k, (key, label, _) in enumerate(shown):
        result = r[key]
        done = [100 * link["succeeded"] / max(1, result["episodes"]) for link in result["links"]]
        bars = right.bar(xs + (k - (len(shown) - 1) / 2) * width, done, width, label=label)
        for bar, value in zip(bars, done, strict=True):
            if value == 0:  # a bar of height 0 is invisible: mark it
                right.plot(bar.get_x() + bar.get_width() / 2, 1, marker="o", mfc="none", color=bar.get_facecolor())
    right.set_xticks(xs, [n.replace("_", " ") for n in names], rotation=40, ha="right", fontsize=8)
    right.set_ylabel("% of held-out episodes that did it (o = 0%)")
    right.set_ylim(0, 100)
    right.legend(fontsize=8)
    right.set_title("how far the plan got", fontsize=10)
    fig.suptitle(f"{r['task']}: the chain alone vs APPO around the kept plan")
    return save_plot(fig, path)
