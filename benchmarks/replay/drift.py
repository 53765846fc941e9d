"""How far a replay's prompts are from its record's: per agent, the replayed calls and those whose prompt is the
recorded one word for word, and where the first one that is not differs.

A replay answers the n-th call of an agent with the n-th recorded answer of that agent whatever its prompt says
(rlgpt.llm.replay), so a run whose prompts changed since it was recorded still replays to the end: only this
comparison says whether the record still is the run it replays.
"""

from __future__ import annotations

import json
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
    """The replay's calls matched to the record's as the replay answered them (the n-th call of an agent to the
    n-th recorded one): recorded and replayed calls, those with the recorded prompt word for word (in all and per
    agent), and the first drift in the record's call order (agent, its call number, the record's file, the first
    differing line) or None. A recorded call the replay never made is counted, not a drift."""
    now: dict[str, list[dict[str, Any]]] = {}
    for call in replayed:
        now.setdefault(call["agent"], []).append(call)
    taken: dict[str, int] = {}
    same: dict[str, int] = {}
    left: dict[str, int] = {}
    drift = None
    for call in recorded:
        agent = call["agent"]
        number = taken.get(agent, 0) + 1
        if number > len(now.get(agent, [])):
            left[agent] = left.get(agent, 0) + 1
            continue
        taken[agent] = number
        difference = first_difference(prompt_text(call["messages"]), prompt_text(now[agent][number - 1]["messages"]))
        if difference is None:
            same[agent] = same.get(agent, 0) + 1
        elif drift is None:
            drift = {"agent": agent, "call": number, "file": call.get("_file", ""), **difference}
    return {"recorded_calls": len(recorded), "replayed_calls": sum(taken.values()),
            "same_prompt": sum(same.values()), "replayed_by_agent": dict(sorted(taken.items())),
            "same_prompt_by_agent": {a: same.get(a, 0) for a in sorted(taken)},
            "unreplayed_by_agent": dict(sorted(left.items())), "drift": drift}


def drift_reason(replay: dict[str, Any]) -> str:
    """One sentence: which agent's prompt first differs, at which of its calls, recorded vs now; or why calls were
    left unreplayed; empty when every recorded call was replayed with its recorded prompt."""
    drift = replay.get("drift")
    parts = []
    if drift:
        parts.append(f"the {drift['agent']} agent's prompt first differs at its call {drift['call']} "
                     f"({drift['file']}), line {drift['line']}: recorded {drift['recorded']!r}, now {drift['now']!r}")
    missing = replay["recorded_calls"] - replay["replayed_calls"]
    if missing:
        agents = ", ".join(f"{a} {n}" for a, n in replay.get("unreplayed_by_agent", {}).items())
        why = "; ".join(w for w in (agents, replay.get("error", "")) if w)
        parts.append(f"{missing} of {replay['recorded_calls']} recorded calls were not replayed"
                     + (f" ({why})" if why else ""))
    return "; ".join(parts)
