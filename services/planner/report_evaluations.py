"""The whole task's evaluations in the run's report: each rate with its Wilson 95% interval, the final chain link
by link next to each sub-task's own success, the critic's verdict after each iteration, and the final
controller's animations.

A state written before these fields (no per-world ``successes``, no ``links``, no ``verdict``) still reads: a
rate's count is then its rate times its episodes, and what is missing is left out.
"""

from __future__ import annotations

from typing import Any

from rlgpt.stats import rate_text, wilson_interval
from services.planner.state import RunState

TARGETS = {"TARGET_FAST": "the fast agent", "TARGET_SLOW": "the slow agent (re-plan)", "TARGET_KEEP": "nobody (kept)"}
"""Who a whole-task verdict sent the work to, in words (``critic_pb2.Target`` names, as state.json has them)."""


def evaluation_counts(record: dict[str, Any] | None) -> tuple[int, int] | None:
    """``(successes, episodes)`` of an evaluation record (an iteration's or the final one), or None when it was
    not evaluated or its size was not recorded."""
    if not record:
        return None
    if successes := record.get("successes"):
        return sum(bool(s) for s in successes), len(successes)
    rate, episodes = record.get("success_rate"), int(record.get("episodes") or 0)
    if rate is None or episodes <= 0:
        return None
    return round(float(rate) * episodes), episodes


def evaluation_text(record: dict[str, Any] | None) -> str:
    """``"75% (24/32, 95% CI 58-87%)"``; the bare rate when the episodes were not recorded; ``"n/a"`` when not
    evaluated; a game task's ``"score 12.3 (32 episodes)"`` (its episodes never succeed)."""
    if (record or {}).get("score") is not None:
        return f"score {float(record['score']):.1f} ({int(record.get('episodes') or 0)} episodes)"
    if (counts := evaluation_counts(record)) is not None:
        return rate_text(*counts)
    rate = (record or {}).get("success_rate")
    return "n/a" if rate is None else f"{float(rate):.0%}"


def evaluation_interval(record: dict[str, Any] | None) -> tuple[float, float, float] | None:
    """``(rate, low, high)``: the rate and its Wilson 95% interval, or None when not evaluated; an evaluation of
    unknown size gets the rate as its interval (no error bar rather than a made-up one)."""
    if (counts := evaluation_counts(record)) is not None:
        return counts[0] / counts[1], *wilson_interval(*counts)
    rate = (record or {}).get("success_rate")
    return None if rate is None else (float(rate), float(rate), float(rate))


def final_line(final: dict[str, Any]) -> str:
    """The header's line on the final evaluation: its rate in bold, count and interval, the worlds, the
    controller."""
    text = evaluation_text(final) if final else "not evaluated"
    rate, _, rest = text.partition(" ")
    worlds = ""
    if (counts := evaluation_counts(final)) is not None and "seed" in final:
        worlds = f" on worlds {final['seed']}..{final['seed'] + counts[1] - 1}"
    return (f"- final task success: **{rate}** {rest}{worlds} ({final.get('controller', 'not evaluated')})"
            if final else "- final task success: not evaluated")


def links_section(state: RunState) -> list[str]:
    """The final chain link by link: how many episodes reached each link and met its conditions there (with the
    interval), next to the sub-task's own success (its last test or evaluation), so a reader sees whether the two
    agree."""
    links = (state.final or {}).get("links") or []
    if not links:
        return []
    lines = ["## The final chain, link by link", "",
             "A sub-task's own success (its last test or evaluation, in episodes of its own) and its link's success "
             "in the chain (of the episodes that reached the link) measure the same thing when the sub-task is "
             "tested where the chain hands over; a large gap says its own test does not see what the chain hands "
             "it.", "",
             "| link | own success | episodes reaching it | met its conditions (of those reaching it) | "
             "mean frames in it |", "|---|---:|---:|---|---:|"]
    for link in links:
        sub = state.subtasks.get(str(link.get("name", "")))
        own = f"{sub.success_rate:.0%}" if sub is not None and sub.tests else "-"
        reached, succeeded = int(link.get("reached", 0)), int(link.get("succeeded", 0))
        frames = link.get("mean_frames")  # None: the env server did not say when each link was done
        lines.append(f"| {link.get('name', '')} | {own} | {reached} | {rate_text(succeeded, reached)} | "
                     f"{'n/a' if frames is None else f'{float(frames):.0f}'} |")
    return [*lines, ""]


def verdict_text(verdict: dict[str, Any]) -> str:
    """A whole-task verdict in one line: who acts on which sub-task, the deaths by cause, the diagnosis."""
    parts = [f"to {TARGETS.get(str(verdict.get('target', '')), verdict.get('target') or 'nobody')}"
             + (f" on {verdict['subtask']}" if verdict.get("subtask") else "")]
    if causes := verdict.get("death_causes"):
        ranked = sorted(causes.items(), key=lambda kv: (-int(kv[1]), kv[0]))
        parts.append("deaths: " + ", ".join(f"{cause} {count}" for cause, count in ranked))
    if verdict.get("diagnosis"):
        parts.append(f"diagnosis: {str(verdict['diagnosis'])[:400]}")
    if verdict.get("suggestion"):
        parts.append(f"suggestion: {str(verdict['suggestion'])[:300]}")
    return "; ".join(parts)


def verdicts_section(state: RunState) -> list[str]:
    """After each outer iteration: the whole task's result, whether that controller was kept (the paired
    comparison), and the whole-task verdict that decided the next iteration's work."""
    rows = [it for it in state.iterations if it.get("verdict") or it.get("kept")]
    if not rows:
        return []
    lines = ["## The whole task after each iteration", ""]
    for it in rows:
        line = f"- iteration {int(it['iteration'])}: {evaluation_text(it)}"
        if it.get("kept"):
            line += f"; {it['kept']}"
        if it.get("verdict"):
            line += f"; verdict {verdict_text(it['verdict'])}"
        lines.append(line.replace("\n", " "))
    return [*lines, ""]


def animations_section(final: dict[str, Any]) -> list[str]:
    """The final controller at play: one successful and one failed episode side by side, as GIFs."""
    animations = final.get("animations") or {}
    shown = [(kind, animations[kind]) for kind in ("success", "failure") if animations.get(kind)]
    if not shown:
        return []
    titles = {"success": "a successful episode", "failure": "a failed episode"}
    return ["## The final controller at play", "",
            "| " + " | ".join(titles[kind] for kind, _ in shown) + " |", "|" + "---|" * len(shown),
            "| " + " | ".join(f"![{kind}]({path})" for kind, path in shown) + " |", ""]
