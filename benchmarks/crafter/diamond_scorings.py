"""Every scoring of one bench-diamond policy, from its raw results: each time the same checkpoint was scored on the
held-out worlds (``scorings``: the earlier ones as per-world successes, the last as the file's own episodes), the
settings chosen by looking at those worlds (``chosen_on_held_out``) and apart from them (``chosen_apart``), and
the declared set scored once (``declared_set``; none yet). The section and its headline cell say so, so that a
result scored more than once never reads as one declared scoring."""

from __future__ import annotations

from typing import Any

from benchmarks.common import joined
from benchmarks.crafter.diamond_results import base, p_text, paired

CONTROLLERS = ("chain", "policy", "policy_greedy")
"""The controllers a scoring holds: the chain alone, the policy sampling, the policy greedy."""


def p_value(p: float) -> str:
    """A p-value with its digits where it is small: a re-scored result's 0.003 is not the same claim as 0.009."""
    return p_text(p) if p >= 0.01 else "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def ends_of(results: dict[str, Any], scoring: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each controller's episode ends in world order (only ``success`` where the scoring kept only that)."""
    if scoring.get("here"):
        run = base(results)[1]
        return {c: run[c]["ends"] for c in CONTROLLERS if run.get(c)}
    return {c: [{"success": bit == "1"} for bit in scoring[c]] for c in CONTROLLERS if scoring.get(c)}


def rate(ends: list[dict[str, Any]]) -> str:
    return f"{100 * sum(e['success'] for e in ends) / len(ends):.1f}%"


def versus(policy: list[dict[str, Any]], chain: list[dict[str, Any]], counts: bool = True) -> str:
    """'17.4% against 14.8% (40 won, 27 lost, p = 0.14)': the sampling policy against the chain alone, world by
    world (the exact McNemar test); without ``counts`` the rates alone."""
    won, lost, p = paired({"ends": policy}, {"ends": chain})
    return f"{rate(policy)} against {rate(chain)}" + (f" ({won} won, {lost} lost, {p_value(p)})" if counts else "")


def worlds(first: int, last: int) -> str:
    return f"worlds {first:,}-{last:,}"


def scored_before(scorings: list[dict[str, Any]], i: int) -> int:
    """How many of the first worlds an earlier scoring of the same policy had played."""
    return max((s["worlds"] for s in scorings[:i]), default=0)


def split_text(ends: dict[str, list[dict[str, Any]]], before: int, counts: bool = True) -> str:
    """A scoring that played worlds an earlier one had: those worlds again, and the new ones, apart."""
    n = len(ends["chain"])
    if not 0 < before < n:
        return ""
    again, new = ({c: e[:before] for c, e in ends.items()}, {c: e[before:] for c, e in ends.items()})
    return (f"{worlds(1, before)} again{' (sampling drawn anew)' if counts else ''}: "
            f"{versus(again['policy'], again['chain'], counts)}; "
            f"{worlds(before + 1, n)}, new: {versus(new['policy'], new['chain'], counts)}")


def scoring_line(results: dict[str, Any], i: int) -> str:
    """One scoring as a list item: the commit that recorded it, its worlds, why, each controller's success."""
    scoring = results["scorings"][i]
    ends = ends_of(results, scoring)
    greedy = f", greedy {rate(ends['policy_greedy'])}" if "policy_greedy" in ends else ""
    split = split_text(ends, scored_before(results["scorings"], i))
    return (f"- {scoring['commit']} ({scoring['committed_utc']}), {worlds(1, len(ends['chain']))}, {scoring['why']}: "
            f"sampling {versus(ends['policy'], ends['chain'])}{greedy}"
            + (" (the numbers below)" if scoring.get("here") else "") + (f"; {split}." if split else "."))


def settings_text(settings: list[dict[str, Any]]) -> str:
    return "; ".join(s["setting"] + (f" ({s['detail']})" if s.get("detail") else "") + f": {s['how']}"
                     for s in settings)


CLEAN = ("a clean result needs a new held-out set, declared before it is scored and scored once, with settings "
         "chosen on validation worlds apart from it")


def declared_text(results: dict[str, Any]) -> str:
    declared = results.get("declared_set")
    if not declared:
        return f"Not done: {CLEAN}."
    return (f"Declared set: {declared['worlds']:,} worlds from seed {declared['first_seed']:,}, declared "
            f"{declared['declared_utc']}, scored once ({declared['commit']}).")


def section_lines(results: dict[str, Any]) -> list[str]:
    """The section's paragraph on its scorings (none for a run whose raw results do not list them)."""
    scorings = results.get("scorings")
    if not scorings:
        return []
    held_out = results.get("held_out_worlds") or {}
    lines = [f"**Not one declared scoring.** This policy (one checkpoint) was scored {len(scorings)} times on the "
             f"same held-out worlds (seeds {held_out.get('first_seed', 0):,} up, {held_out.get('note', '')}); each "
             "line gives the sampling policy against the chain alone, world by world (exact McNemar p):", ""]
    lines += [scoring_line(results, i) for i in range(len(scorings))]
    chosen, apart = results.get("chosen_on_held_out") or [], results.get("chosen_apart") or []
    lines += ["", (f"Chosen on these held-out worlds: {settings_text(chosen)}. " if chosen else "")
              + (f"Chosen apart from them: {settings_text(apart)}. " if apart else "") + declared_text(results), ""]
    return lines


def headline_text(results: dict[str, Any]) -> str:
    """The headline cell's caveat: the scorings before this one, what this one's new worlds gave, the settings
    chosen on these worlds, and whether a declared set was scored once."""
    scorings = results.get("scorings")
    if not scorings:
        return ""
    earlier = [f"{worlds(1, s['worlds'])}: {versus(e['policy'], e['chain'])}"
               for s, e in ((s, ends_of(results, s)) for s in scorings[:-1])]
    split = split_text(ends_of(results, scorings[-1]), scored_before(scorings, len(scorings) - 1), counts=False)
    chosen = joined([s["setting"] for s in results.get("chosen_on_held_out") or []])
    return (f"; not one declared scoring: scored first on {', then on '.join(earlier)}, then on these worlds"
            + (f" ({split})" if split else "") + (f"; {chosen} chosen on them" if chosen else "")
            + ("" if results.get("declared_set") else "; no declared set scored once yet"))
