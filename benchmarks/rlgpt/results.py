"""bench-rlgpt's results file: every run carries when, on which machine and with which LLM it was measured, so a
rerun of one (task, mode, agent setup) replaces that run and leaves the others, each with its own date.

Results saved before runs carried their own (one ``date_utc``, ``machine``, ``llm`` and ``skill_format`` for the
whole bench) read as if each run had the bench's (:func:`measured`); a merge writes them into each run."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

MEASURED = ("date_utc", "machine", "llm", "skill_format")
"""What each run records of where and how it was measured (``skill_format``: RLGPT_SKILL_FORMAT)."""
COMPARED = ("frames", "eval_episodes", "outer", "inner")
"""The settings every run of one results file shares: runs at other budgets do not compare at equal frames."""
LOAD = ", load average "


def measured(results: dict[str, Any], run: dict[str, Any]) -> dict[str, str]:
    """The run's :data:`MEASURED` fields, the bench's where the run has none ("" where neither has one)."""
    return {key: run.get(key) or results.get(key) or "" for key in MEASURED}


def machine_and_load(machine: str) -> tuple[str, str]:
    """'Intel Xeon, 2 cores, ..., Python 3.11.7' and '0.53' from a machine line (load "" where it has none)."""
    base, _, load = machine.partition(LOAD)
    return base, load.removesuffix(" at start")


def key(run: dict[str, Any]) -> tuple[str, str, str]:
    """What a rerun replaces: the task, mode and agent setup."""
    return run["task"], run["mode"], run.get("agents") or ""


def merged(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new``'s runs merged into ``old``: each replaces the run of the same :func:`key` in its place, the others
    are appended; every run keeps its own date (filled from its bench's in results saved before runs had them).
    ``old`` at other settings (:data:`COMPARED`), or none: ``new`` alone."""
    if old is None:
        return new
    changed = [k for k in COMPARED if old["settings"].get(k) != new["settings"].get(k)]
    if changed:
        log.warning("the saved results were measured at other settings (%s): they are replaced, not merged",
                    ", ".join(f"{k} {old['settings'].get(k)} -> {new['settings'].get(k)}" for k in changed))
        return new
    runs = [{**run, **measured(old, run)} for run in old["runs"]]
    for run in ({**run, **measured(new, run)} for run in new["runs"]):
        at = next((i for i, kept in enumerate(runs) if key(kept) == key(run)), None)
        if at is None:
            runs.append(run)
        else:
            runs[at] = run
    agents = list(dict.fromkeys([*old["settings"].get("agents", []), *new["settings"].get("agents", [])]))
    bench = {k: v for k, v in {**old, **new}.items() if k not in MEASURED}
    return bench | {"settings": {**new["settings"], "agents": agents}, "runs": runs,
                    "total_seconds": sum(run.get("seconds", 0.0) for run in runs)}


FORMATS = {"auto": "a skill program for the embedded models, Python otherwise", "python": "Python code",
           "program": "a skill program"}
"""What each RLGPT_SKILL_FORMAT setting has the fast agent write."""


def distinct(results: dict[str, Any], field: str) -> list[str]:
    """The runs' values of a :data:`MEASURED` field, each once, in the runs' order (the machine without its load)."""
    values = (measured(results, run)[field] for run in results["runs"])
    return list(dict.fromkeys(machine_and_load(v)[0] if field == "machine" else v for v in values if v))


def measured_text(results: dict[str, Any]) -> str:
    """Where and with what the runs were measured, for the section's first sentence (each run's date is in the
    table: :func:`measured_cell`)."""
    formats = [f"RLGPT_SKILL_FORMAT={f} ({FORMATS.get(f, f)})" for f in distinct(results, "skill_format")]
    return (f"Each run measured on the date in the table's last column (UTC; the load average at its start where "
            "recorded), "
            f"on {' and '.join(distinct(results, 'machine')) or 'an unrecorded machine'}; "
            f"LLM: {' and '.join(distinct(results, 'llm')) or 'unrecorded'}; "
            + (f"skills written as {' and '.join(formats)}; " if formats else ""))


def measured_cell(results: dict[str, Any], run: dict[str, Any]) -> str:
    """'2026-11-28 16:18, load 0.53' (the LLM too where the runs had more than one)."""
    mine = measured(results, run)
    load = machine_and_load(mine["machine"])[1]
    llm = f", {mine['llm']}" if len(distinct(results, "llm")) > 1 else ""
    return f"{mine['date_utc'].removesuffix(' UTC') or '-'}" + (f", load {load}" if load else "") + llm


def date_span(results: dict[str, Any]) -> str:
    """The runs' date, or the first and last where they differ ('2026-11-28 16:18 UTC to 2026-11-29 00:19 UTC')."""
    dates = sorted(distinct(results, "date_utc"))
    return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates else "-"
