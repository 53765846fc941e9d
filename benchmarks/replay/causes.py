"""The prompt changes a replay found, said in words: each known edit to the product's prompts (found by diffing the
kept records' prompts with their replays', then looked up in git) is named once, with the commit that made it
where git names one; a change no entry names is shown as its text. Rendering only: the raw results keep the
changes' text as found.
"""

from __future__ import annotations

from typing import Any

KNOWN: tuple[tuple[str, str], ...] = (
    ('every action acts as "sleep"', "the game's rules say that asleep, every action acts as sleep until the player "
                                     "wakes (2a8f3e3, 2026-11-27)"),
    ("(counting |dx| + |dy|)", "the game's rules say how a zombie's distance is counted and that next to means "
                               "sharing a side (2a8f3e3, 2026-11-27)"),
    ("first unlocked in an episode", "the reward rules say an achievement pays once per achievement and episode "
                                     "(2a8f3e3, 2026-11-27)"),
    ("its limits:", "the answer format states the schema's limits (lengths, entry counts), added after the record "
                    "(76e5a12, 2026-11-28)"),
    ("Giving up on purpose", "the skill rules gained the paragraph on giving up on purpose (a skill's raise "
                             "ValueError is reported, not a code error; 45cdba4, 2026-11-23)"),
    ("its tests report that message with the line", "the skill rules gained the paragraph on giving up on purpose "
                                                    "(a skill's raise ValueError is reported, not a code error; "
                                                    "45cdba4, 2026-11-23)"),
    ("Write one skill for the game Crafter", "the fast agent's first line names the game (\"one skill for the game "
                                             "Crafter\")"),
    ("Python skill in the", "the one agent's answer format says \"Python skill\" (5f45ed2, 2026-11-26)"),
    ("(success: ", "the task line names the task's success condition"),
    ("end_on_success", "the reward rules say the success condition ends an episode only where end_on_success is "
                       "true (6f1d295, 2026-11-25)"),
    ("runs of one action like", "the critic's episode trace header is reworded (d9a7148, 2026-11-28)"),
    ("RL configuration (what the training used", "the critic's prompt gained an RL configuration part ((none) for "
                                                 "a coded skill; 5e676d2, 2026-11-25)"),
    ("(none)", "the critic's prompt gained an RL configuration part ((none) for a coded skill; 5e676d2, 2026-11-25)"),
    ("(one move repeated", "the critic's dead-loop finding is reworded (d9a7148, 2026-11-28)"),
    ("test episodes succeeded (rate", "a passed sub-task's feedback in the slow agent's prompt is the checks' "
                                      "own text where the record had the critic LLM's: the critic now drops an "
                                      "answer that copies its prompt's example word for word, and the model's "
                                      "suggestion was the example's \"No change needed.\" (337ef88, 2026-11-25)"),
)
"""(text in the changed line, what the change is) in the order tried; the first whose text the change's added (or,
when none is added, removed) text holds names it."""


def cause(change: dict[str, Any]) -> str:
    """What a change is, in words: a known edit's name, or the change's own text (recorded -> now)."""
    text = change["added"] or change["removed"]
    for needle, words in KNOWN:
        if needle in text:
            return words
    return ""


def named_causes(changes: list[dict[str, Any]]) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The known edits among ``changes`` with the most calls any of their lines was seen in (in first-seen order),
    and the changes no known edit names."""
    named: dict[str, int] = {}
    other = []
    for change in changes:
        words = cause(change)
        if words:
            named[words] = max(named.get(words, 0), change["calls"])
        else:
            other.append(change)
    return named, other


def other_text(change: dict[str, Any]) -> str:
    """An unnamed change as its text: 'recorded' -> 'now' (an empty side as nothing)."""
    return f"{change['removed'] or '(nothing)'!r} -> {change['added'] or '(nothing)'!r}"
