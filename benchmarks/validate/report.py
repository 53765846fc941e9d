"""bench-validate's section of docs/BENCHMARKS.md, computed from its raw file alone.

Per recorded run: each arm (the code it was played with) on the run's validation worlds, its task success with a
95% interval, and every later arm compared with the first on the worlds both played, paired world by world (exact
McNemar).
"""

from __future__ import annotations

from collections import Counter
from statistics import median
from typing import Any

from benchmarks.common import markdown_table
from rlgpt import stats

TITLE = "## Validation worlds: one recorded controller, played by different code"


def won(arm: dict[str, Any]) -> dict[int, bool]:
    """World -> whether the episode on it reached the arm's task."""
    return {e["seed"]: arm["task"] in e["achievements"] for e in arm["episodes"]}


def _deaths(arm: dict[str, Any]) -> str:
    kinds = Counter(kind.strip() for e in arm["episodes"] if e.get("death_cause")
                    for kind in e["death_cause"].split(" and "))
    return ", ".join(f"{kind} {count}" for kind, count in kinds.most_common(4)) or "none"


def _comparison(arm: dict[str, Any], first: dict[str, Any]) -> str:
    ours, theirs = won(arm), won(first)
    shared = sorted(set(ours) & set(theirs))
    if not shared or arm is first:
        return "the first arm" if arm is first else "no world in common"
    return stats.paired([ours[w] for w in shared], [theirs[w] for w in shared]).text()


def render_section(results: dict[str, Any]) -> str:
    lines = [TITLE, "",
             "`make bench-validate` plays a recorded run's final controller (its skills' code as recorded) on the "
             "run's validation worlds (`rlgpt/worlds.py` `validation_worlds`: apart from its own evaluations and "
             "from bench-game's held-out sets), with whatever code the bench runs from: each arm names its commit. "
             "Settings and mechanisms are chosen here, never on held-out worlds. Crafter's episodes (10,000 "
             "frames or death), one per world; the task counts when its achievement was unlocked."]
    runs: dict[str, list[dict[str, Any]]] = {}
    for arm in results.get("arms", []):
        runs.setdefault(arm["run"], []).append(arm)
    for run, arms in runs.items():
        first = arms[0]
        lines += ["", f"**{run}** ({first['task']}):", ""]
        rows = []
        for arm in arms:
            wins = sum(won(arm).values())
            worlds = f"{arm['first_seed']:,}..{arm['first_seed'] + len(arm['episodes']) - 1:,}"
            rows.append((arm["label"], f"`{arm['code']}`", arm["date_utc"][:10], worlds,
                         stats.rate_text(wins, len(arm["episodes"])),
                         f"{median(e['length'] for e in arm['episodes']):g}", _deaths(arm),
                         _comparison(arm, first)))
        lines += markdown_table(("arm", "code", "date", "worlds", f"{first['task']}", "median length",
                                 "deaths (kind: episodes)", "against the first arm"), rows, "lllllrll")
    return "\n".join(lines) + "\n"
