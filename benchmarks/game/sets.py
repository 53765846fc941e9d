"""bench-game's held-out sets: declared before they are scored, scored once, apart from every world the run played.

Set ``k`` of a run is ``n`` worlds from ``worlds.game_bench_worlds(run_seed, k)``. Before a set is scored it is
checked against the worlds the run itself used (its skill tests, sub-task and whole-task evaluations, each at most
:data:`MAX_EPISODES` worlds, and every training worker's worlds up to its frame budget) and against every scoring of
the same run in any raw file of the bench; a set scored already is refused with the next free one.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from benchmarks.game.raw import RESULTS
from rlgpt import worlds
from services.learner.rl_config import DEFAULT_ENVS_PER_WORKER, DEFAULT_NUM_WORKERS
from services.learner.servicer import MAX_EVAL_EPISODES
from services.planner.state import RunState

MAX_EPISODES = MAX_EVAL_EPISODES
"""The most worlds one evaluation of a run plays (the learner's limit; RunSkill's is lower)."""


class SetRefused(ValueError):
    """A set that may not be scored: scored already, or overlapping worlds the run used."""


@dataclasses.dataclass(frozen=True)
class WorldRange:
    purpose: str
    first: int
    last: int
    """Inclusive."""

    def overlaps(self, other: WorldRange) -> bool:
        return self.first <= other.last and other.first <= self.last

    def as_json(self) -> list[Any]:
        return [self.purpose, self.first, self.last]


def declared_set(run_seed: int, set_index: int, episodes: int) -> WorldRange:
    """The worlds of set ``set_index``; ValueError when it would hold more than a set may."""
    if not 1 <= episodes <= worlds.GAME_BENCH_SET:
        raise ValueError(f"episodes={episodes}: a held-out set holds 1..{worlds.GAME_BENCH_SET:,} worlds")
    if set_index < 0:
        raise ValueError(f"set={set_index}: sets are numbered from 0")
    first = worlds.game_bench_worlds(run_seed, set_index)
    return WorldRange(f"set {set_index}", first, first + episodes - 1)


def _job_ids(state: RunState) -> list[str]:
    ids = [sub.job_id for sub in state.subtasks.values()]
    ids += [t.get("job_id", "") for sub in state.subtasks.values() for t in sub.tests]
    records = (state.kept_plan, getattr(state, "game_controller", None))  # the latter: game runs only
    ids += [str((record or {}).get("job_id", "")) for record in records]
    return sorted({job for job in [*ids, *state.trainings] if job})


def _training_config(job: str, state: RunState, jobs_dir: Path) -> tuple[dict[str, Any], str]:
    """A job's seed, workers, envs per worker and frames: from its config in ``jobs_dir``, else its sub-task's last
    RL config, else the learner's defaults with the run's seed and all its frames (an upper bound)."""
    path = jobs_dir / job / "config.json"
    if path.exists():
        return json.loads(path.read_text())["config"], "its config"
    sub = next((s for s in state.subtasks.values() if job in (s.job_id, *(t.get("job_id") for t in s.tests))), None)
    if sub is not None and sub.rl_config:
        return sub.rl_config, "its sub-task's RL config"
    return {}, "assumed: the learner's defaults"


def run_world_ranges(run_seed: int, state: RunState, jobs_dir: Path) -> list[WorldRange]:
    """Every world range the run may have played (an upper bound of each)."""
    span = MAX_EPISODES - 1
    ranges = [WorldRange(purpose, first, first + span) for purpose, first in (
        ("skill tests", worlds.skill_test_worlds(run_seed)),
        ("sub-task evaluations", worlds.held_out_worlds(run_seed)),
        ("final evaluation", worlds.final_worlds(run_seed)),
        ("iteration evaluations", worlds.iteration_worlds(run_seed)),
        ("kept-plan revision briefing", worlds.revision_worlds(run_seed)))]
    for job in _job_ids(state):
        config, source = _training_config(job, state, jobs_dir)
        seed = int(config.get("seed", run_seed))
        envs = int(config.get("envs_per_worker") or DEFAULT_ENVS_PER_WORKER)
        # Env i of a worker plays world first + i + k * envs in its k-th episode: below first + frames + envs.
        frames = int(config.get("env_frames") or state.frames_used)
        for worker in range(int(config.get("num_workers") or DEFAULT_NUM_WORKERS)):
            first = worlds.training_worlds(seed, worker)
            ranges.append(WorldRange(f"training {job}, worker {worker} ({source})", first, first + frames + envs))
    return ranges


def scorings_of(raw_root: Path, run_id: str) -> list[tuple[Path, dict[str, Any]]]:
    """Every scoring of run ``run_id`` in the bench's raw files under ``raw_root``, with its file."""
    found = []
    for path in sorted(raw_root.glob(f"*/{RESULTS}")):
        doc = json.loads(path.read_text())
        if doc.get("run", {}).get("id") == run_id:
            found.extend((path, scoring) for scoring in doc.get("scorings", []))
    return found


def next_free_set(scorings: list[dict[str, Any]]) -> int:
    return max((int(s["set"]) for s in scorings), default=-1) + 1


def check_new_set(raw_root: Path, run_id: str, run_seed: int, set_index: int, episodes: int,
                  used: list[WorldRange]) -> dict[str, Any] | None:
    """Refuses (SetRefused) a set scored already, overlapping another scoring's or the run's own worlds; returns
    the same set's declaration when it was declared and never scored (an interrupted scoring: nothing was seen),
    so that it is scored under that declaration."""
    wanted = declared_set(run_seed, set_index, episodes)
    earlier = scorings_of(raw_root, run_id)
    free = next_free_set([s for _, s in earlier])
    fresh = declared_set(run_seed, free, episodes)
    advice = (f"To score this controller again, declare a new set: --set {free} (worlds {fresh.first:,}.."
              f"{fresh.last:,}); the section lists every scoring made.")
    for path, scoring in earlier:
        theirs = WorldRange(f"set {scoring['set']}", int(scoring["first_seed"]),
                            int(scoring["first_seed"]) + int(scoring["episodes_declared"]) - 1)
        if not theirs.overlaps(wanted):
            continue
        if int(scoring["set"]) == set_index and scoring.get("status") == "declared" and theirs == wanted:
            return scoring
        when = scoring.get("scored_utc") or f"declared {scoring.get('declared_utc', '?')}"
        raise SetRefused(f"held-out {theirs.purpose} of run {run_id} (worlds {theirs.first:,}..{theirs.last:,}) was "
                         f"scored already ({when}, {path}); a held-out set is scored once. {advice}")
    clash = next((r for r in used if r.overlaps(wanted)), None)
    if clash is not None:
        raise SetRefused(f"{wanted.purpose} (worlds {wanted.first:,}..{wanted.last:,}) overlaps the run's own "
                         f"{clash.purpose} (worlds {clash.first:,}..{clash.last:,}): held-out worlds must be apart "
                         "from every world the run played; choose another --set")
    return None
