"""`make bench-replay`: RL-GPT runs of a capable model, recorded through the LLM relay, re-run from their records.

The model the machine cannot host answers the product's own requests through ``rlgpt serve llm-relay``
(it sees nothing but each request file). Its run directory is kept in the repository, small JSON only:

    python -m benchmarks.bench_replay keep RUN_DIR --name NAME --model "WHO ANSWERED"   # -> docs/runs/NAME/
    python -m benchmarks.bench_replay run        # replays every docs/runs/*/ (rlgpt run --replay): every LLM
                                                 # call from the record, skills, trainings and evaluation live
    python -m benchmarks.bench_replay report     # the section of docs/BENCHMARKS.md, from the raw results alone

``keep`` records the run's own id in ``recorded.json`` (``run_id``: the skills it registered are named by it, not by
NAME) and, for a whole-game run, the score of its own final evaluation (not a held-out score: bench-game's).
``run`` keeps, per kept run, its recorded numbers and its replay's (success, or a whole-game run's score; frames;
the replayed calls, those whose prompt was the recorded one word for word, the calls not made or answered with
another call's record, and every distinct line that changed) in the tracked docs/results/bench-replay.json;
``report`` rebuilds the section from that file. A record whose prompts drifted is listed as drifted with what
changed, not as reproduced. Anyone can therefore check a capable model's RL-GPT numbers with no model at all.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from benchmarks.common import load_results, machine_description, save_results, setup_logging, utc_now, write_section
from benchmarks.replay.changes import prompt_changes
from benchmarks.replay.drift import compare_prompts, llm_calls
from benchmarks.replay.records import critic_asked_on_pass, kept_runs, recorded_entry, run_id_of, run_summary
from benchmarks.replay.report import RAW, TITLE, drift_summary, measure_text, render_section
from rlgpt.app.runner import RunOptions, run_rlgpt

log = logging.getLogger("benchmarks.replay")
console = Console(stderr=True)
app = typer.Typer(add_completion=False, help=__doc__)
RUNS = Path("docs/runs")
ON_PASS = "RLGPT_CRITIC_LLM_ON_PASS"
"""The critic's setting a replay turns on for a record whose critic was asked about passed attempts too."""
KEPT = ("request.json", "library_start.json", "state.json", "report.md", "llm", "attempts")


@app.command()
def keep(run_dir: Path, name: Annotated[str, typer.Option(help="Folder name under docs/runs.")],
         model: Annotated[str, typer.Option(help="Who answered the requests, named honestly.")]) -> None:
    """Copies a finished run's request, state, report, attempts and LLM records into docs/runs/NAME."""
    if not (run_dir / "state.json").exists():
        raise typer.BadParameter(f"{run_dir} has no state.json: not a run directory")
    target = RUNS / name
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for item in KEPT:
        source = run_dir / item
        if source.is_dir():
            shutil.copytree(source, target / item)
        elif source.exists():
            shutil.copy2(source, target / item)
    for png in run_dir.glob("*.png"):
        shutil.copy2(png, target / png.name)
    summary = run_summary(run_dir) | {"run_id": run_id_of(run_dir), "model": model, "recorded": time.strftime(
        "%Y-%m-%d %H:%M UTC", time.gmtime((run_dir / "request.json").stat().st_mtime))}
    save_results(target / "recorded.json", summary)
    console.print(f"kept {run_dir} ({summary['run_id']}) as {target}: {summary['task']} {measure_text(summary)}")


def record_digest(source: Path) -> str:
    """A kept record's LLM calls as one digest: a replay is of this record only while the digest is the same."""
    digest = hashlib.sha256()
    for path in sorted((source / "llm").glob("*.json")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _replayed_dir(runs_dir: Path) -> Path | None:
    """The run a replay started in ``runs_dir`` (a folder of its own): the newest folder with a request.json."""
    found = [p for p in runs_dir.iterdir() if (p / "request.json").exists()] if runs_dir.is_dir() else []
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def replay_one(source: Path, runs_dir: Path) -> dict[str, Any]:
    """Replays one kept run in ``runs_dir`` (emptied first) and compares its prompts with the record's: the
    replay's success, frames, wall time, calls, the drift and what changed, and the error that stopped it, if one
    did. A record whose critic was asked about passed attempts is replayed with the critic asking then too (the
    services take this process's environment), so its critic calls are made for what they were recorded for."""
    if runs_dir.exists():
        shutil.rmtree(runs_dir)
    options = RunOptions(task="", success="", mode="rl-gpt", agents="", resume=None, runs_dir=runs_dir, outer=1,
                         inner=1, frames_per_training=1, total_frames=0, eval_episodes=1, candidates=1, seed=0,
                         replay=source)
    recorded = llm_calls(source / "llm")
    on_pass = critic_asked_on_pass(recorded)
    date, machine, start, error = utc_now(), machine_description(), time.time(), ""
    before = os.environ.get(ON_PASS)
    os.environ[ON_PASS] = "true" if on_pass else "false"
    try:
        run_rlgpt(options)
    except Exception as exc:  # a replay that stops is a result: its calls up to there are compared, the error kept
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
        log.warning("the replay of %s stopped: %s", source.name, error)
    finally:
        if before is None:
            os.environ.pop(ON_PASS)
        else:
            os.environ[ON_PASS] = before
    wall = round(time.time() - start, 1)
    run_dir = _replayed_dir(runs_dir)
    replayed = run_summary(run_dir) if run_dir and (run_dir / "state.json").exists() else {}
    calls = llm_calls(run_dir / "llm") if run_dir else []
    return {"date": date, "machine": machine, "wall_seconds": wall, "error": error, "critic_on_pass": on_pass,
            "run_dir": str(run_dir or runs_dir), "success_rate": replayed.get("success_rate"),
            "score": replayed.get("score"),
            "frames_used": replayed.get("frames_used", 0), **compare_prompts(recorded, calls),
            **prompt_changes(recorded, calls)}


@app.command()
def run(only: Annotated[str, typer.Option(help="Replay only this docs/runs folder (the others keep their last "
                                                "replay).")] = "",
        runs_dir: Annotated[Path, typer.Option(help="Where the replayed runs go.")] = Path("runs/replay"),
        log_level: Annotated[str, typer.Option(help="Logging level.")] = "warning") -> None:
    """Replays the kept runs (rlgpt run --replay) and saves every kept run's numbers in the raw results."""
    setup_logging(console, log_level)
    sources = kept_runs(RUNS)
    if only and only not in {s.name for s in sources}:
        raise typer.BadParameter(f"{only[:60]!r} is no kept run under {RUNS}", param_hint="--only")
    before = {r["name"]: r for r in load_results(RAW)["runs"]} if RAW.exists() else {}
    runs = []
    for source in sources:
        entry = {"name": source.name, "digest": record_digest(source), "recorded": recorded_entry(source)}
        previous = before.get(source.name, {})
        if only and source.name != only:
            same_record = previous.get("digest") == entry["digest"]
            entry["replay"] = previous.get("replay") if same_record else None
        else:
            console.rule(f"replaying {source.name}")
            entry["replay"] = replay_one(source, runs_dir / source.name)
            console.print(f"{source.name}: {drift_summary(entry['replay'])}")
        runs.append(entry)
    save_results(RAW, {"raw": str(RAW), "runs_dir": str(RUNS), "runs": runs})
    console.print(f"saved {RAW}")


@app.command()
def report(output: Annotated[Path, typer.Option(help="Benchmarks file.")] = Path("docs/BENCHMARKS.md"),
           raw: Annotated[Path, typer.Option(help="The raw results `run` saved.")] = RAW) -> None:
    """Writes the section from the raw results alone (measures nothing)."""
    if not raw.exists():
        raise typer.BadParameter(f"no results at {raw}; run `python -m benchmarks.bench_replay run` first")
    write_section(output, TITLE, render_section(load_results(raw)))
    console.print(f"wrote {output} from {raw}")


if __name__ == "__main__":
    app()
