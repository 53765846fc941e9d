"""The skill library each bench-rlgpt run starts from: a file of its own per run, empty at its start (the bench),
what the run's raw result records of it, and how the section says it.

The planner reads its library from ``RLGPT_PLANNER_LIBRARY_PATH`` (``PlannerSettings.library_path``) when it
starts, so each run gets services of its own started with a fresh file there. A run's raw result records
``library``: the file (relative to the bench's work directory), whether other runs shared it, and the skills the
run found at its start (the planner's snapshot in the run's ``library_start.json``). Results saved before runs
recorded it shared one library in the table's order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.common import joined
from benchmarks.rlgpt.runs import label

LIBRARY_ENV = "RLGPT_PLANNER_LIBRARY_PATH"
"""The planner setting that names its skill library file (services/planner/settings.py, ``library_path``)."""
LIBRARIES = "libraries"
"""The folder of the work directory that holds one library file per run."""
SNAPSHOT = "library_start.json"
"""The library as a run found it, written into the run's directory by the planner (services/planner/servicer.py)."""
NOT_RECORDED = "shared (not recorded)"


def run_library(work: Path, index: int, task: str, mode: str, agents: str) -> Path:
    """The library file of the ``index``-th run of a bench, with nothing in it yet (an earlier bench's file of that
    name removed): the run's planner starts from an empty library that no other run writes to."""
    path = work / LIBRARIES / (f"{index:02d}-{task}-{mode}" + (f"-{agents}" if agents else "") + ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    return path


def started_with(work: Path, library: Path, run_dir: Path | None) -> dict[str, Any]:
    """What a run's raw result records of its library: the file, not shared, and the skills at the run's start
    (from the planner's snapshot in ``run_dir``; without a planner run, from the file itself)."""
    source = run_dir / SNAPSHOT if run_dir is not None else library
    skills = [doc["name"] for doc in json.loads(source.read_text())] if source.exists() else []
    return {"file": str(library.relative_to(work)), "shared": False, "skills": skills}


def library_cell(run: dict[str, Any]) -> str:
    """'own, empty', 'shared, empty', 'shared: get_3_wood, place_table' (the skills it found at its start)."""
    library = run.get("library")
    if library is None:
        return NOT_RECORDED
    kind = "shared" if library["shared"] else "own"
    return f"{kind}: {', '.join(library['skills'])}" if library["skills"] else f"{kind}, empty"


def library_text(runs: list[dict[str, Any]]) -> str:
    """Which library state the runs started from, and whether the modes compare from the same one."""
    shared = [r for r in runs if (r.get("library") or {"shared": True})["shared"]]
    with_skills = [f"`{r['task']}` / `{label(r)}`" for r in runs if (r.get("library") or {}).get("skills")]
    parts = ["The `library at start` column: the skill library each run started from and the skills it found in "
             f"it (the planner's snapshot in the run's `{SNAPSHOT}`)."]
    if len(shared) < len(runs):
        parts.append(f"{'Each run' if not shared else 'Each run marked `own`'} had a library of its own: a fresh file "
                     "given to services started for that run alone, so no run found a skill another run wrote.")
    if shared:
        parts.append("Runs marked `shared` ran one after the other on one planner and its skill library, in the "
                     "table's order: a skill that passed its tests in an earlier run was offered to later ones, so "
                     "these runs do not compare from the same library state"
                     + (f"; {joined(with_skills)} started with skills of earlier runs." if with_skills else "."))
    return " ".join(parts)
