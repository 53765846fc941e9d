"""What changed in a drifted record's prompts: every replayed call diffed with its recorded one, line by line, and
the distinct changes kept (the text removed and the text added, each shortened to where the two differ) with the
calls they appear in, so the raw results say which prompt text moved since the record and the section can say it
in words without the replay's run directory.

A change is counted once per call that shows it; the same edit to a shared part of the prompts (the game's rules, a
sentence of the fast agent's instructions) is therefore one change seen in many calls.
"""

from __future__ import annotations

import difflib
from typing import Any

from benchmarks.replay.drift import matched_calls, prompt_text

QUOTE_CHARS = 160
"""Characters of each side of a change kept in the raw results (the words that differ, a few words around them)."""
CONTEXT_WORDS = 3
"""Words kept on either side of the differing words of a changed line."""
MAX_CHANGES = 40
"""Distinct changes kept per record (a replay whose live results differ can change many lines of trace)."""


def _shorten(text: str) -> str:
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 1] + "…"


def _words_changed(old: str, new: str) -> tuple[str, str]:
    """The differing span of two lines, word by word, with a few words of context either side (``…`` where cut)."""
    a, b = old.split(" "), new.split(" ")
    blocks = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not blocks:
        return _shorten(old), _shorten(new)
    a_lo, a_hi = max(0, blocks[0][1] - CONTEXT_WORDS), min(len(a), blocks[-1][2] + CONTEXT_WORDS)
    b_lo, b_hi = max(0, blocks[0][3] - CONTEXT_WORDS), min(len(b), blocks[-1][4] + CONTEXT_WORDS)

    def span(words: list[str], lo: int, hi: int) -> str:
        return ("…" if lo else "") + " ".join(words[lo:hi]) + ("…" if hi < len(words) else "")

    return _shorten(span(a, a_lo, a_hi)), _shorten(span(b, b_lo, b_hi))


def line_changes(recorded: str, now: str) -> list[tuple[str, str]]:
    """The changes between two prompts, each as (removed, added): a changed line as its differing words, a line
    only removed or only added whole (shortened); blank lines are ignored."""
    old = [line.strip() for line in recorded.split("\n") if line.strip()]
    new = [line.strip() for line in now.split("\n") if line.strip()]
    out = []
    for tag, a_lo, a_hi, b_lo, b_hi in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        removed, added = old[a_lo:a_hi], new[b_lo:b_hi]
        paired = min(len(removed), len(added)) if tag == "replace" else 0
        out += [_words_changed(removed[i], added[i]) for i in range(paired)]
        out += [(_shorten(line), "") for line in removed[paired:]]
        out += [("", _shorten(line)) for line in added[paired:]]
    return out


def prompt_changes(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> dict[str, Any]:
    """The distinct changes over all replayed calls (matched by purpose, as :func:`compare_prompts` does), in the
    order first seen, at most :data:`MAX_CHANGES`: removed and added text, the agents whose prompts show it and in
    how many calls; and how many more distinct changes were left out."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for old, new in matched_calls(recorded, replayed)[0]:
        agent = old["agent"]
        for removed, added in dict.fromkeys(line_changes(prompt_text(old["messages"]), prompt_text(new["messages"]))):
            entry = found.setdefault((removed, added), {"removed": removed, "added": added, "agents": [], "calls": 0})
            entry["calls"] += 1
            if agent not in entry["agents"]:
                entry["agents"].append(agent)
    changes = list(found.values())
    return {"changes": changes[:MAX_CHANGES], "changes_left_out": max(0, len(changes) - MAX_CHANGES)}
