"""A recorded controller played by this code on validation worlds: ``make bench-validate`` runs
``python -m benchmarks.bench_validate``.

A finished run's final controller (its skills' code as recorded, as bench-game reads it) plays the run's
validation worlds (``rlgpt/worlds.py`` ``validation_worlds``), Crafter's episodes, one per world, with the env
server and sandbox of the code this bench runs from. Each such play is an arm, labelled and stamped with that code's
commit, appended to docs/bench-raw/validate/results.json; the section pairs every arm with the run's first on the
same worlds. How a mechanism of the env server (what skills perceive, how the chain runs) changes what the same
recorded code achieves is measured here, where settings may be chosen, never on bench-game's held-out sets.
``--server-code`` plays with another checkout's env server (e.g. the commit before a change: ``git worktree add``).
``--guards FILE`` adds guards (CreateSessionRequest.guards) to the controller: a JSON object whose ``guards`` list
holds each guard's ``name``, ``code``, ``when`` (``[{"label": "status/drink", "value": 3}]``; ``"above": true`` for
an entry above its value) and ``max_frames``,
and whose ``written_by`` says who wrote them; the arm keeps the file's content.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from benchmarks.cli_common import LogLevel, ReportOnly
from benchmarks.common import REPO_ROOT, load_results, machine_info, save_results, setup_logging, utc_now, write_section
from benchmarks.crafter.run import start_env_servers
from benchmarks.game.controller import iteration_controller, read_controller
from benchmarks.game.play import game_task, play, register
from benchmarks.game.raw import episode_records
from benchmarks.validate.report import TITLE, render_section
from rlgpt import worlds
from rlgpt.v1 import common_pb2, learner_pb2

log = logging.getLogger("benchmarks.validate")
console = Console(stderr=True)
RAW = Path("docs/bench-raw/validate/results.json")  # sections.py: bench_raw("validate")


def code_commit(root: Path) -> str:
    """The commit of the checkout at ``root`` (``+changes`` when its tracked files differ from it)."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=True).stdout.strip()
    return head + ("+changes" if dirty else "")


def read_guards(path: Path) -> tuple[dict[str, Any], list[common_pb2.Guard], dict[str, str]]:
    """A guards file: its content, the guards as the env server takes them and their skills' code by name."""
    try:
        doc = json.loads(path.read_text())
        entries = doc["guards"]
        guards = [common_pb2.Guard(skill=g["name"], max_frames=int(g["max_frames"]),
                                   when=[common_pb2.Threshold(label=w["label"], value=float(w["value"]),
                                                              above=bool(w.get("above", False)))
                                         for w in g["when"]]) for g in entries]
        code = {g["name"]: g["code"] for g in entries}
    except KeyError as exc:
        raise typer.BadParameter(f"{path}: no {exc} in it; give a JSON object with 'written_by' and 'guards' (each "
                                 "with name, code, when and max_frames)", param_hint="--guards") from None
    except (OSError, ValueError, TypeError) as exc:
        raise typer.BadParameter(f"{path}: {exc}; give a JSON object with 'written_by' and 'guards' (each with name, "
                                 "code, when and max_frames)", param_hint="--guards") from None
    if not doc.get("written_by") or not guards:
        raise typer.BadParameter(f"{path}: say who wrote the guards ('written_by') and give at least one",
                                 param_hint="--guards")
    return doc, guards, code


def main(
    run: Annotated[Path | None, typer.Option(help="A finished RL-GPT run's directory (state.json, request.json).")
                   ] = None,
    label: Annotated[str, typer.Option(help="What this arm is, in a few words (e.g. 'episode map memory').")] = "",
    episodes: Annotated[int, typer.Option(help="Validation worlds, one episode each.", min=1, max=1024)] = 128,
    raw: Annotated[Path, typer.Option(help="The raw file the arm is appended to.")] = RAW,
    jobs: Annotated[Path, typer.Option(help="The learner's job folder (a controller with policies).")] = Path(
        "runs/learner/jobs"),
    output: Annotated[Path, typer.Option(help="Markdown file whose section is replaced.")] = Path(
        "docs/BENCHMARKS.md"),
    server_code: Annotated[Path | None, typer.Option(help="A checkout whose env server plays (its commit is the "
                                                         "arm's code); default: this repository's.")] = None,
    work: Annotated[Path, typer.Option(help="Where the env server's log goes.")] = Path("runs/bench-validate"),
    guards: Annotated[Path | None, typer.Option(help="A JSON file of guards to add to the controller (see the "
                                                     "module's doc).")] = None,
    plan_alone: Annotated[bool, typer.Option(help="A final policy around the kept plan: play the plan alone "
                                                  "(its coded chain, no policy) instead.")] = False,
    iteration: Annotated[int | None, typer.Option(help="Play this outer iteration's all-code chain, as its record "
                                                       "keeps it, instead of the final controller.", min=0)] = None,
    report_only: ReportOnly = False,
    log_level: LogLevel = "INFO",
) -> None:
    """One arm: the run's final controller on its validation worlds, played by this code."""
    setup_logging(console, log_level)
    if not report_only:
        if run is None or not label:
            raise typer.BadParameter("give --run and --label (or --report-only)", param_hint="--run")
        try:
            controller = (iteration_controller(run, iteration) if iteration is not None
                          else read_controller(run, jobs, plan_alone))
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--run") from None
        guard_doc, guard_list, guard_code = read_guards(guards) if guards else ({}, [], {})
        results = load_results(raw) if raw.exists() else {"bench": "validate", "arms": []}
        first = worlds.validation_worlds(controller.seed)
        code = code_commit(server_code or REPO_ROOT)  # as the server starts: what it imports
        servers, _ = start_env_servers(1, work / "logs", {}, learner_pb2.RLConfig(backend="crafter"),
                                       session_envs=episodes, code=server_code)
        started = time.time()
        try:
            task, _ = game_task(servers[0].target)
            register(servers[0].target, {**controller.skills, **guard_code})
            console.print(f"{run.name}: {controller.kind} on worlds {first:,}..{first + episodes - 1:,}"
                          + f" with {len(guard_list)} guards" * bool(guard_list))
            try:
                response = play(controller, servers[0].target, task, first, episodes, guard_list)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--guards") from None
        finally:
            servers[0].stop()
        results["arms"].append({
            "run": run.resolve().name, "run_id": controller.run_id, "task": controller.task, "label": label,
            "code": code, "date_utc": utc_now(),
            "wall_s": round(time.time() - started, 1),
            "machine": machine_info(("crafter",)), "first_seed": first,
            **({"plan_alone": True} if plan_alone else {}),
            **({"iteration": iteration} if iteration is not None else {}),
            **({"guards": guard_doc} if guard_doc else {}),
            "episodes": episode_records(response.episodes, first)})
        save_results(raw, results)
    write_section(output, TITLE, render_section(load_results(raw)))


if __name__ == "__main__":
    typer.run(main)
