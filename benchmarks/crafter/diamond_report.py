"""bench-diamond's section of BENCHMARKS.md, built only from the saved results (its figure: ``diamond_plot``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.common import machine_line, markdown_table
from benchmarks.crafter.diamond import PLAN_SKILLS_RUN, macro_label
from benchmarks.crafter.diamond_results import (
    VARIANTS,
    base,
    comparisons,
    controllers,
    end_kind,
    ended_in,
    interrupting,
    p_text,
    paired,
    variant,
)
from benchmarks.crafter.diamond_scorings import section_lines
from rlgpt.env_contract import action_name

SECTION_TITLE = "## collect_diamond with a kept plan: the chain alone vs APPO around it (make bench-diamond)"


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


def section_title(results: dict[str, Any]) -> str:
    """The section a run's results belong in: the fast agent's config alone, interrupts, a plan prior, or the
    bench's own config."""
    kind, run = base(results)
    title = (AGENT_TITLE if kind == "agent" else INTERRUPT_TITLE if interrupting(run)
             else PRIOR_TITLE if run.get("plan_prior") else SECTION_TITLE)
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


BLOCK = 256
"""Worlds per block in :func:`blocks_text`: the earlier runs scored 256 held-out worlds, and every run plays the
held-out worlds in the same order, so its first block is theirs."""


def paired_text(result: dict[str, Any], chain: dict[str, Any]) -> str:
    only_policy, only_chain, p = paired(result, chain)
    return (f"World by world: it succeeded in {only_policy} where the chain failed and failed in {only_chain} where "
            f"the chain succeeded (exact McNemar test, two-sided {p_text(p)}"
            + ("; a difference this size is within chance)." if p >= 0.05 else ").") + blocks_text(result, chain))


def blocks_text(result: dict[str, Any], chain: dict[str, Any]) -> str:
    """Both controllers' success per block of :data:`BLOCK` held-out worlds (runs of more than one block)."""
    n = len(chain["ends"])
    if n <= BLOCK:
        return ""
    parts = []
    for start in range(0, n, BLOCK):
        block = {"ends": result["ends"][start:start + BLOCK]}, {"ends": chain["ends"][start:start + BLOCK]}
        won = [sum(e["success"] for e in side["ends"]) / len(side["ends"]) for side in block]
        only_policy, only_chain, _ = paired(*block)
        parts.append(f"worlds {start + 1}-{start + len(block[1]['ends'])}: {100 * won[0]:.1f}% against "
                     f"{100 * won[1]:.1f}% ({only_policy} won, {only_chain} lost)")
    return " By blocks of held-out worlds (each run plays them in the same order): " + "; ".join(parts) + "."


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def reward_text(terms: list[list[Any]]) -> str:
    """Reward terms as "kind [target] weight" ([kind, weight] or [kind, weight, target])."""
    return ", ".join(f"{t[0]}{' ' + t[2] if len(t) > 2 else ''} {t[1]:+g}" for t in terms)


def action_label(name: str) -> str:
    """An action as the sections name it (:func:`rlgpt.env_client.action_name`, as the planner's texts do)."""
    return action_name(name, macro_label)


def shares_text(shares: dict[str, float]) -> str:
    """Shares of decisions per action, the largest first: "the plan 93%, shelter 4%"."""
    return ", ".join(share_text(n, share) for n, share in sorted(shares.items(), key=lambda item: -item[1]))


def share_text(action: str, share: float) -> str:
    """One action's share of the decisions: "the plan 93%"."""
    return f"{action_label(action)} {100 * share:.0f}%"


def decisions_text(first: dict[str, Any], last: dict[str, Any]) -> str:
    """What the policy chose in training, the first window against the last (share of its decisions per action;
    a plan or macro action is one decision however many frames it plays)."""
    if not first.get("actions") or not last.get("actions"):
        return ""
    names = sorted(set(first["actions"]) | set(last["actions"]),
                   key=lambda n: (-last["actions"].get(n, 0.0), -first["actions"].get(n, 0.0), n))
    shares = [f"{share_text(n, first['actions'].get(n, 0.0))} -> {100 * last['actions'].get(n, 0.0):.0f}%"
              for n in names]
    return (" Its decisions (share of the policy's choices, a plan or macro action one choice however many frames "
            "it plays), the first window -> the last: " + ", ".join(shares) + ".")


def held_out_choices(result: dict[str, Any]) -> str:
    """What a policy chose on the held-out worlds (results scored from 2026-11-27 20:37 UTC on)."""
    return f" Its decisions on these worlds: {shares_text(result['actions'])}." if result.get("actions") else ""


def trained_text(run: dict[str, Any]) -> str:
    """When a run's frames were trained (results from 2026-11-27 20:37 UTC on): the section's date is when it
    was scored."""
    span = run.get("trained") or {}
    if not span:
        return ""
    return (f", from {span['from_utc']} to {span['to_utc']}"
            + (f" in {span['invocations']} invocations (resumed)" if span["invocations"] > 1 else ""))


def updates_text(run: dict[str, Any]) -> str:
    """How hard the learner worked each batch, when more than one gradient step per batch."""
    up = run.get("updates") or {}
    if up.get("epochs", 1) == 1 and up.get("minibatches", 1) == 1:
        return ""
    return (f", {up['epochs']} passes over each batch in {up['minibatches']} minibatches "
            f"({up['epochs'] * up['minibatches']} gradient steps per batch, not one; "
            "`RLConfig.num_epochs`, `num_minibatches`)")


def render_section(results: dict[str, Any], plot: str | None, title: str = SECTION_TITLE) -> str:
    kind, r = base(results)
    own = kind == "run"  # the bench's own config opens the section; else the fast agent's alone
    chain = r["chain"]
    steps = [link["name"].removeprefix("diamond_") for link in chain["links"]]
    opening = (
        machine_line(results["date_utc"] if own else results["agent"]["date_utc"],
                     results["machine"] if own else results["agent"]["machine"],
                     ("torch", "sample-factory", "crafter"))
        + f". The plan and its skills: the last plan of `{Path(r['run']).name}` ({len(steps)} sub-tasks, each a "
        f"skill written by {r['llm']}), read from its state.json. The chain alone: every action is the plan action.")
    if own:
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
            + updates_text(r)
            + f", episodes of up to 10,000 frames, trained for {frames_cell} ({r['train_episodes']:,} training "
            f"episodes, {r['train_s'] / 60:.0f} min{trained_text(r)}).")
    lines = [
        title, "",
        opening + f" All are scored on the same {chain['episodes']} held-out worlds "
        "(the learner's evaluation seeds, never trained on); the policy sampling its actions as in training, and "
        "greedy (its most probable action, `EvaluateRequest.greedy`).", "",
        *section_lines(results),  # every scoring of this policy, before any of its numbers
    ]
    if agent := results.get("agent"):
        a = agent["run"]
        frames_cell = f"{a['frames']:,} of {a['budget']:,} frames" + ("" if a["complete"] else " (partial)")
        macros = ", ".join(map(macro_label, a.get("macro_actions", {}))) or "none"
        lines += [
            f"**The fast agent's config.** The model ({agent['llm']}) answered the planner's prompt for RL around "
            "this plan "
            "(`--agent-prompt` renders it as a run would: the plan, and how the chain alone failed on 64 briefing "
            f"worlds, seeded apart from the training and held-out ones) with K={a['k']}, the primitives "
            f"{', '.join(a['primitives'])}, its macro actions {macros}"
            + ("" if own else threat_text(a))
            + (interrupt_text(a["interrupt"]).replace(", so that the policy acts where the plan is in trouble", "")
               if interrupting(a) else "")
            + ", and reward " + reward_text(a["reward"])
            + " (stage and success are the planner's)"
            + (f"; the policy starting on the plan action with probability {a['plan_prior']:g}, as the planner's "
               "does" if a.get("plan_prior") else "")
            + updates_text(a) + ("" if own else ", episodes of up to 10,000 frames")
            + f". Trained for {frames_cell} ({a['train_episodes']:,} "
            f"training episodes, {a['train_s'] / 60:.0f} min{trained_text(a) or ', ' + agent['date_utc']}); the "
            "answer is "
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
                        "ends)." if same else " " + paired_text(result, own_chain)) + held_out_choices(result))
    for name, who, _ in VARIANTS:
        v = variant(results, name)
        if v.get("plan_prior"):
            who += f", starting on the plan (p={v['plan_prior']:g})"
        if curve := v.get("curve"):
            first, last = curve[0], curve[-1]
            lines.append(f"In training with {who}, the success rate went from {100 * first['success_rate']:.1f}% "
                         f"(the first {first['frames']:,} frames) to {100 * last['success_rate']:.1f}% (the last "
                         f"window, by {last['frames']:,} frames); deaths from {100 * first['deaths']:.0f}% to "
                         f"{100 * last['deaths']:.0f}% of episodes." + decisions_text(first, last))
        if (prior := v.get("plan_prior")) and (v.get("policy") or {}).get("actions"):
            others = len(v["primitives"]) + len(v.get("macro_actions", {}))
            lines.append(f"Untrained, the policy chose the plan with probability {100 * prior:.0f}% and each of the "
                         f"other {others} actions with {100 * (1 - prior) / others:.0f}% (`RLConfig.plan_prior`): "
                         "compare its decisions on the held-out worlds above.")
    lines += [str(note) for note in r.get("notes", [])]  # what is known of the run besides its numbers
    if plot:
        lines += ["", f"![collect_diamond with a kept plan]({plot})"]
    return "\n".join(lines) + "\n"
