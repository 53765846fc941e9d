"""bench-skills' section of docs/BENCHMARKS.md, from the committed files alone: each answer's test results
(``<subtask>.a<N>.result.json``) and the report's record of who answered, when and where (``report.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.common import markdown_table

TITLE = "## A capable model writes skills from the fast agent's prompt (make bench-skills)"
SUBTASKS = ("collect_wood", "place_table", "make_wood_pickaxe", "collect_stone", "place_stone", "collect_coal",
            "make_stone_pickaxe", "place_furnace", "collect_iron", "collect_drink", "eat_cow", "collect_sapling",
            "place_plant", "wake_up")
EPISODES = 5
STEPS = 500
MAX_ATTEMPTS = 3
META = "report.json"
"""In the answers' directory: the model as named, the date and machine of the tests, and ``stale`` (why the
answers no longer answer the fast agent's prompt) where they do not."""


def attempts(answers: Path, subtask: str) -> list[dict[str, Any]]:
    """The sub-task's test results, in attempt order."""
    results = [json.loads(p.read_text()) for p in sorted(answers.glob(f"{subtask}.a*.result.json"))]
    return sorted(results, key=lambda r: r["attempt"])


def rows(answers: Path) -> list[tuple[str, float | None, float | None, str, str]]:
    """(sub-task, first attempt's success, best success, every attempt's, what the test starts with)."""
    out: list[tuple[str, float | None, float | None, str, str]] = []
    for name in SUBTASKS:
        results = attempts(answers, name)
        if not results:
            out.append((name, None, None, "", ""))
            continue
        out.append((name, results[0]["success_rate"], max(r["success_rate"] for r in results),
                    " / ".join(f"{r['success_rate']:.0%}" for r in results),
                    ", ".join(f"{k} {v}" for k, v in results[0]["start_inventory"].items()) or "nothing"))
    return out


def summary(answers: Path) -> tuple[int, int, int, int, float]:
    """(sub-tasks answered, succeeding on the first attempt, after revisions, at 100%, mean first success)."""
    done = [r for r in rows(answers) if r[1] is not None]
    first = [r[1] or 0.0 for r in done]
    best = [r[2] or 0.0 for r in done]
    return (len(done), sum(v > 0 for v in first), sum(v > 0 for v in best), sum(v >= 1.0 for v in best),
            sum(first) / len(done) if done else 0.0)


def load_meta(answers: Path) -> dict[str, Any]:
    return json.loads((answers / META).read_text())


def render_section(answers: Path, shown: Path | None = None) -> str:
    """The section: who answered, how the skills were tested, the counts and the table per sub-task; ``shown``:
    how the section names the answers' directory (default: as given)."""
    meta = load_meta(answers)
    done, first_ok, best_ok, full, mean_first = summary(answers)
    table = [(name, start, f"{first:.0%}", f"{best:.0%}", every) if first is not None and best is not None
             else (name, "-", "not run", "-", "-") for name, first, best, every, start in rows(answers)]
    lines = [
        TITLE, "",
        f"Measured {meta['date_utc']} on {meta['machine']}. Model: {meta['model']}; it was given only the fast "
        "agent's rendered code prompt (Describe's skill API and world rules included) and, for a revision, the "
        "prompt with its previous code and RunSkill's error and trajectories. Each skill is tested on "
        f"{EPISODES} fresh worlds of at most {STEPS} frames, starting with the items below (derived from the world's "
        f"rules); at most {MAX_ATTEMPTS} attempts. Answers, prompts and results: `{shown or answers}`.", "",
        f"{first_ok} of {done} sub-tasks had a skill that succeeded in at least one episode on the first attempt, "
        f"{best_ok} of {done} after revisions; {full} of {done} reached 100%; mean first-attempt success "
        f"{mean_first:.0%}.", "",
        *markdown_table(("sub-task", "starts with", "first attempt", "best", "every attempt"), table, "llrrl"),
    ]
    if meta.get("stale"):
        lines += ["", f"**Stale:** {meta['stale']}"]
    return "\n".join(lines) + "\n"
