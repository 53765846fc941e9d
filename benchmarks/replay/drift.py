"""How far a replay's prompts are from its record's: the replayed calls matched to the recorded ones, those whose
prompt is the recorded one word for word, the recorded calls the replay never made, the calls it answered with
another call's record, and where the first differing prompt differs.

A replay answers the n-th call of an agent with the n-th recorded answer of that agent whatever its prompt says
(rlgpt.llm.replay), so a run whose prompts changed since it was recorded still replays to the end: only this
comparison says whether the record still is the run it replays. Calls are matched by what they were for (their
record's name: iteration, sub-task, agent, and the how-many-th such call), not by their number, so a call the
replay skips (a critic no longer asked after a passed test) leaves the calls after it comparable.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

EXCERPT_CHARS = 90
"""Characters of the first differing line shown, recorded and now, around where they first differ."""


def llm_calls(llm_dir: Path) -> list[dict[str, Any]]:
    """A run's LLM records (``<run_dir>/llm/*.json``) in call order; none when the folder is missing."""
    return [json.loads(p.read_text()) | {"_file": p.name} for p in sorted(llm_dir.glob("*.json"))]


def prompt_text(messages: list[dict[str, Any]]) -> str:
    """A call's prompt as one text: its messages in order, each as ``role: content``."""
    return "\n".join(f"{m.get('role', '')}: {m.get('content', '')}" for m in messages)


def call_purpose(call: dict[str, Any]) -> str:
    """What a call was for: its record's name without the call number (``iter0-collect_wood-critic``), or its agent
    where the record has no such name."""
    return re.sub(r"^\d+-", "", call.get("_file", "")).removesuffix(".json") or call["agent"]


def _keyed(calls: list[dict[str, Any]]) -> list[tuple[tuple[str, int], dict[str, Any]]]:
    seen: Counter[str] = Counter()
    out = []
    for call in calls:
        purpose = call_purpose(call)
        seen[purpose] += 1
        out.append(((purpose, seen[purpose]), call))
    return out


def matched_calls(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]
                  ) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[dict[str, Any]]]:
    """(recorded, replayed) pairs of the calls made for the same purpose (the k-th such call to the k-th), in the
    record's order, and the recorded calls the replay did not make."""
    now = dict(_keyed(replayed))
    pairs, missing = [], []
    for key, call in _keyed(recorded):
        if key in now:
            pairs.append((call, now[key]))
        else:
            missing.append(call)
    return pairs, missing


def answered_elsewhere(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The replayed calls answered with the record of another call (the n-th call of an agent takes that agent's
    n-th recorded answer): each as the call and the recorded file whose answer it got."""
    queues: dict[str, list[dict[str, Any]]] = {}
    for call in recorded:
        queues.setdefault(call["agent"], []).append(call)
    taken: Counter[str] = Counter()
    out = []
    for call in replayed:
        agent = call["agent"]
        queue, taken[agent] = queues.get(agent, []), taken[agent] + 1
        source = queue[taken[agent] - 1] if taken[agent] <= len(queue) else None
        if source is not None and call_purpose(source) != call_purpose(call):
            out.append({"call": call_purpose(call), "answered_with": source.get("_file", "")})
    return out


def _excerpt(line: str, column: int) -> str:
    start = max(0, column - EXCERPT_CHARS // 3)
    text = line[start:start + EXCERPT_CHARS]
    return ("…" if start else "") + text + ("…" if start + EXCERPT_CHARS < len(line) else "")


def first_difference(recorded: str, now: str) -> dict[str, Any] | None:
    """Where two prompts first differ: the line (from 1) and a short excerpt of that line in each, around the first
    differing character (an empty excerpt where one prompt has no such line); None when they are the same."""
    if recorded == now:
        return None
    old, new = recorded.split("\n"), now.split("\n")
    line = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    a, b = (old[line] if line < len(old) else ""), (new[line] if line < len(new) else "")
    column = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return {"line": line + 1, "recorded": _excerpt(a, column), "now": _excerpt(b, column)}


def compare_prompts(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> dict[str, Any]:
    """The replay's calls against the record's: recorded and replayed calls (matched by purpose), those with the
    recorded prompt word for word, per agent; the recorded calls not made, per agent; the calls answered with
    another call's record; the first drift in the record's call order (agent, its call number, the record's file,
    the first differing line) or None."""
    pairs, missing = matched_calls(recorded, replayed)
    by_agent: dict[str, dict[str, int]] = {}
    for call in recorded:
        by_agent.setdefault(call["agent"], {"recorded": 0, "replayed": 0, "same": 0})["recorded"] += 1
    number: Counter[str] = Counter()
    drift = None
    for old, new in pairs:
        agent = old["agent"]
        by_agent[agent]["replayed"] += 1
        number[agent] += 1
        difference = first_difference(prompt_text(old["messages"]), prompt_text(new["messages"]))
        if difference is None:
            by_agent[agent]["same"] += 1
        elif drift is None:
            drift = {"agent": agent, "call": number[agent], "file": old.get("_file", ""), **difference}
    return {"recorded_calls": len(recorded), "replayed_calls": len(pairs),
            "same_prompt": sum(a["same"] for a in by_agent.values()), "by_agent": dict(sorted(by_agent.items())),
            "not_made": dict(sorted(Counter(c["agent"] for c in missing).items())),
            "answered_elsewhere": answered_elsewhere(recorded, replayed), "drift": drift}
