"""bench-validate's section of docs/BENCHMARKS.md, computed from its raw file alone.

Per recorded run: each arm (the code it was played with) on the run's validation worlds, its task success with a
95% interval, and every later arm compared with the first on the worlds both played, paired world by world (exact
McNemar).
"""

from __future__ import annotations

from collections import Counter
from statistics import median
from typing import Any

from benchmarks.common import machine_line, markdown_table
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


def arm_row(arm: dict[str, Any], first: dict[str, Any]) -> tuple[str, ...]:
    wins = sum(won(arm).values())
    worlds = f"{arm['first_seed']:,}..{arm['first_seed'] + len(arm['episodes']) - 1:,}"
    return (arm["run"], arm["label"], f"`{arm['code']}`", worlds, stats.rate_text(wins, len(arm["episodes"])),
            f"{median(e['length'] for e in arm['episodes']):g}", _deaths(arm), _comparison(arm, first))


def latest_change(results: dict[str, Any]) -> str:
    """The headline cell: the latest arm against its run's first, in a few words."""
    arms = results.get("arms", [])
    if not arms:
        return "no arm yet"
    last = arms[-1]
    first = next(arm for arm in arms if arm["run"] == last["run"])
    rate = stats.rate_text(sum(won(last).values()), len(last["episodes"])).split(" (")[0]
    start = stats.rate_text(sum(won(first).values()), len(first["episodes"])).split(" (")[0]
    return (f"{last['run']}'s controller, {last['task']}: {rate} with {last['label'].split(':')[0]} against "
            f"{start} ({_comparison(last, first).split(': ', 1)[-1]})")


def render_section(results: dict[str, Any]) -> str:
    arms = results.get("arms", [])
    firsts = {}
    for arm in arms:
        firsts.setdefault(arm["run"], arm)
    machines = sorted({machine_line(a["date_utc"][:10], a["machine"], ("crafter",)) for a in arms if "machine" in a})
    lines = [TITLE, "",
             "`make bench-validate` plays a recorded run's final controller (its skills' code as recorded, no LLM; "
             "`--plan-alone`: a kept plan's policy replaced by its plan alone; `--iteration N`: the chain an outer "
             "iteration evaluated) on the run's validation worlds (`rlgpt/worlds.py` `validation_worlds`: apart "
             "from its own evaluations and from bench-game's held-out sets) with the env server of the commit each "
             "arm names, and pairs each arm with its run's first on the same worlds. Settings and mechanisms are "
             "chosen here, never on held-out worlds. Crafter's episodes (10,000 frames or death), one per world; "
             f"the task counts when its achievement was unlocked. {'; '.join(machines)}.", ""]
    lines += markdown_table(("run", "arm", "code", "worlds", "task success", "median length",
                             "deaths (kind: episodes)", "against the run's first arm"),
                            [arm_row(arm, firsts[arm["run"]]) for arm in arms], "llllllrl")
    for arm in arms:
        if guards := arm.get("guards"):
            lines += ["", f"Guards of the arm \"{arm['label']}\" ({guards['written_by']}; their code is in the raw "
                          "file): " + "; ".join(f"`{g['name']}` when {_trigger(g['when'])}, at most "
                                                f"{g['max_frames']} frames" for g in guards["guards"]) + "."]
    return "\n".join(lines) + "\n"


def _trigger(when: list[dict[str, Any]]) -> str:
    return " or ".join(f"{w['label']} {'above' if w.get('above') else 'below'} {w['value']:g}" for w in when)
