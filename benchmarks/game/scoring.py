"""One scoring of a run's final controller on one declared held-out set: the set checked (scored once, apart from
the run's worlds), declared in the raw file before any episode is played, then played and saved per episode."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, machine_info, utc_now
from benchmarks.game import raw
from benchmarks.game.controller import FinalController
from benchmarks.game.play import game_task, play, register
from benchmarks.game.sets import SetRefused, WorldRange, check_new_set, declared_set
from benchmarks.replay.records import recorded_entry, run_summary

log = logging.getLogger("benchmarks.game")


def shown_path(path: Path) -> str:
    """A path as the raw file keeps it: relative to the repository when inside it."""
    resolved = path.resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


def run_info(controller: FinalController) -> dict[str, Any]:
    """The run as its directory tells it when scored: task, LLM, frames spent, LLM calls, tokens, wall time."""
    run_dir = controller.run_dir
    summary = recorded_entry(run_dir) if (run_dir / "recorded.json").exists() else run_summary(run_dir)
    state = json.loads((run_dir / "state.json").read_text())
    calls = sorted((run_dir / "llm").glob("*.json"))
    llm = summary.get("model") or (json.loads(calls[0].read_text()).get("model", "") if calls else "")
    return {"dir": shown_path(run_dir), "id": controller.run_id, "seed": controller.seed, "task": controller.task,
            "llm": llm, "frames_used": summary["frames_used"], "frame_budget": state.get("frame_budget", 0),
            "llm_calls": summary["llm_calls"], "tokens": summary["tokens"], "wall_seconds": summary["wall_seconds"]}


def open_doc(path: Path, name: str, controller: FinalController) -> dict[str, Any]:
    """The raw file's document for this run (a new one when there is none); SetRefused when the file holds another
    run, or this run with another final controller (then its scorings would not be of one controller)."""
    mine = controller.as_json()
    if not path.exists():
        return {"bench": "bench-game", "name": name, "run": run_info(controller), "controller": mine, "scorings": []}
    doc = json.loads(path.read_text())
    if doc["run"]["id"] != controller.run_id:
        raise SetRefused(f"{path} holds the scorings of run {doc['run']['id']}; score run {controller.run_id} under "
                         "another --name")
    if doc["controller"] != mine:
        raise SetRefused(f"{path}: the run's final controller is not the one its earlier scorings played (the run "
                         "changed since); score it under another --name")
    return doc


def score(controller: FinalController, target: str, raw_root: Path, name: str, set_index: int, episodes: int,
          used: list[WorldRange], episode_length: int = 0,
          on_change: Callable[[], None] | None = None) -> dict[str, Any]:
    """Scores ``controller`` on set ``set_index`` (``episodes`` worlds) with the env server at ``target``: refuses a
    set scored already (SetRefused), declares it in ``raw_root/name/results.json`` (``on_change`` then rewrites
    the section, so the seeds are published before any is played), plays it and saves every episode there.
    ``episode_length``: shorter episodes than the game's, for tests only (the raw file says so)."""
    path = raw.raw_file(raw_root, name)
    declared = check_new_set(raw_root, controller.run_id, controller.seed, set_index, episodes, used)
    doc = open_doc(path, name, controller)
    task, achievements = game_task(target, episode_length)
    wanted = declared_set(controller.seed, set_index, episodes)
    if declared is None:
        declared = {"set": set_index, "first_seed": wanted.first, "episodes_declared": episodes,
                    "declared_utc": utc_now(), "apart_from": [r.as_json() for r in used],
                    "episode_length": int(task.episode_length), "achievements": achievements, "status": "declared"}
        doc["scorings"].append(declared)
    else:  # declared before and never scored (interrupted): nothing of it was seen, so it is scored now
        declared = next((s for s in doc["scorings"] if s["set"] == set_index), None)
        if declared is None:
            raise SetRefused(f"set {set_index} of run {controller.run_id} was declared in another raw file under "
                             f"{raw_root}; score it there (its --name)")
        declared["attempts"] = int(declared.get("attempts", 1)) + 1
    raw.save(path, doc)
    if on_change:
        on_change()
    log.info("declared set %d of %s: worlds %s..%s in %s", set_index, controller.run_id, f"{wanted.first:,}",
             f"{wanted.last:,}", path)
    register(target, controller.skills)
    started = time.time()
    response = play(controller, target, task, wanted.first, episodes)
    declared.update(status="scored", scored_utc=utc_now(), wall_s=round(time.time() - started, 1),
                    machine=machine_info(("crafter",)), episodes=raw.episode_records(response.episodes, wanted.first))
    raw.save(path, doc)
    if on_change:
        on_change()
    numbers = raw.numbers(declared)
    log.info("set %d of %s: score %.2f over %d episodes", set_index, controller.run_id, numbers["score"],
             numbers["episodes"])
    return doc
