"""`make bench-replay`: RL-GPT runs of a capable model, recorded through the LLM relay, re-run from their records.

The model the machine cannot host answers the product's own requests through ``rlgpt serve llm-relay``
(it sees nothing but each request file). Its run directory is kept in the repository, small JSON only:

    python -m benchmarks.bench_replay keep RUN_DIR --name NAME --model "WHO ANSWERED"   # -> docs/runs/NAME/
    python -m benchmarks.bench_replay run        # replays every docs/runs/*/ (rlgpt run --replay): every LLM
                                                 # call from the record, skills, trainings and evaluation live
    python -m benchmarks.bench_replay report     # the table -> docs/BENCHMARKS.md

Anyone can therefore reproduce a capable model's RL-GPT numbers with no model at all.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from benchmarks.common import machine_description, write_section
from rlgpt.app.runner import RunOptions, recorded_request, run_rlgpt

log = logging.getLogger("bench_replay")
console = Console(stderr=True)
app = typer.Typer(add_completion=False, help=__doc__)
TITLE = "## RL-GPT with a capable model through the relay, replayed (make bench-replay)"
RUNS = Path("docs/runs")
RESULTS = Path("docs/bench-raw/replay")
KEPT = ("request.json", "library_start.json", "state.json", "report.md", "llm", "attempts")


def run_summary(run_dir: Path) -> dict[str, Any]:
    """Task, budgets, final success, frames, sub-task results, LLM calls and wall time of one run directory."""
    state = json.loads((run_dir / "state.json").read_text())
    request = recorded_request(run_dir)
    records = [json.loads(p.read_text()) for p in sorted((run_dir / "llm").glob("*.json"))]
    final = state.get("final") or {}
    times = []
    events = run_dir / "events.jsonl"
    if events.exists():
        times = [json.loads(line)["time"] for line in events.read_text().splitlines() if line.strip()]
    subtasks = state.get("subtasks", {})
    budgets = request.budgets
    return {"task": request.task.name, "success_rate": final.get("success_rate"), "finished": state.get("finished"),
            "controller": final.get("controller", ""), "frames_used": state.get("frames_used", 0),
            "budgets": {f.name: getattr(budgets, f.name) for f in budgets.DESCRIPTOR.fields
                        if budgets.HasField(f.name)},
            "plan": [s["name"] + f" ({s.get('decision', '')})".replace("DECISION_", "").lower()
                     for s in state.get("plan", {}).get("subtasks", [])],
            "subtask_best": {name: max((t.get("success_rate", 0.0) for t in sub.get("tests", [])), default=0.0)
                             for name, sub in subtasks.items()},
            "llm_calls": len(records), "llm_calls_by_agent": _count(r["agent"] for r in records),
            "tokens": sum(r.get("prompt_tokens", 0) + r.get("completion_tokens", 0) for r in records),
            "wall_seconds": round(float(times[-1]) - float(times[0]), 1) if len(times) > 1 else None}


def _count(names: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        out[name] = out.get(name, 0) + 1
    return out


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
    summary = run_summary(run_dir) | {"model": model, "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(
        (run_dir / "request.json").stat().st_mtime))}
    (target / "recorded.json").write_text(json.dumps(summary, indent=1))
    console.print(f"kept {run_dir} as {target}: {summary['task']} success {summary['success_rate']}")


@app.command()
def run(only: Annotated[str, typer.Option(help="Replay only this docs/runs folder.")] = "",
        runs_dir: Annotated[Path, typer.Option(help="Where the replayed runs go.")] = Path("runs/replay")) -> None:
    """Replays every kept run (rlgpt run --replay) and keeps its numbers in docs/bench-raw/replay/."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    for source in sorted(p for p in RUNS.iterdir() if (p / "recorded.json").exists()):
        if only and source.name != only:
            continue
        console.rule(f"replaying {source.name}")
        start = time.time()
        options = RunOptions(task="", success="", mode="rl-gpt", agents="", resume=None, runs_dir=runs_dir,
                             outer=1, inner=1, frames_per_training=1, total_frames=0, eval_episodes=1, candidates=1,
                             seed=0, replay=source)
        report = run_rlgpt(options)
        result = run_summary(report.parent) | {"replay": json.loads((report.parent / "replay.json").read_text()),
                                               "replay_wall_seconds": round(time.time() - start, 1),
                                               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start)),
                                               "machine": machine_description()}
        (RESULTS / f"{source.name}.json").write_text(json.dumps(result, indent=1))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


_BUDGET_NAMES = {"max_outer_iterations": "O", "max_inner_iterations": "I", "env_frames_per_training":
                 "frames/training", "total_env_frames": "frames in all", "eval_episodes": "E", "candidates": "N"}


def _budgets(budgets: dict[str, int]) -> str:
    return ", ".join(f"{_BUDGET_NAMES.get(k, k)}={v}" for k, v in budgets.items()) or "the planner's defaults"


def summary_sentences(pairs: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> list[str]:
    """What the table shows, computed from the recorded and replayed numbers."""
    out = []
    solved = [rec["task"] for rec, _ in pairs if (rec["success_rate"] or 0) > 0]
    unsolved = [rec for rec, _ in pairs if not (rec["success_rate"] or 0) > 0]
    if solved:
        out.append(f"{len(solved)} of {len(pairs)} recorded runs solved their task "
                   f"({', '.join(dict.fromkeys(solved))}).")
    for rec in unsolved:
        best = rec.get("subtask_best", {})
        passed = [n for n, r in best.items() if r >= 0.8]
        failed = ", ".join(f"{n} (best {r:.0%})" for n, r in best.items() if r < 0.8)
        out.append(f"{rec['task']} ended at {_pct(rec['success_rate'])} over the final episodes; {len(passed)} of "
                   f"{len(best)} sub-tasks passed their own tests (80%)" + (f", not {failed}" if failed else "") + ".")
    replayed = [(rec, rep) for rec, rep in pairs if rep]
    same = [rec["task"] for rec, rep in replayed if rep["success_rate"] == rec["success_rate"]
            and rep["frames_used"] == rec["frames_used"]]
    if replayed:
        out.append(f"Replayed with no model, {len(same)} of {len(replayed)} runs reproduced the recorded final success "
                   "and frame count exactly" + (f" ({', '.join(dict.fromkeys(same))})" if same else "") + ".")
    return out


@app.command()
def report(output: Annotated[Path, typer.Option(help="Benchmarks file.")] = Path("docs/BENCHMARKS.md")) -> None:
    """Writes the section from the kept records and the latest replays."""
    rows, pairs, models, replays = [], [], set(), []
    for source in sorted(p for p in RUNS.iterdir() if (p / "recorded.json").exists()):
        rec = run_summary(source) | json.loads((source / "recorded.json").read_text())
        models.add(rec["model"])
        raw = RESULTS / f"{source.name}.json"
        rep = json.loads(raw.read_text()) if raw.exists() else None
        pairs.append((rec, rep))
        if rep:
            replays.append(rep)
        agents = ", ".join(f"{a} {n}" for a, n in sorted(rec["llm_calls_by_agent"].items()))
        replayed = (f"{_pct(rep['success_rate'])} | {rep['frames_used']} | {rep['replay']['same_prompt']}/"
                    f"{rep['replay']['replayed_calls']} | {rep['replay_wall_seconds']:.0f}" if rep else
                    "not replayed | - | - | -")
        rows.append(f"| {rec['task']} | `docs/runs/{source.name}` | {_budgets(rec['budgets'])} | "
                    f"{'; '.join(rec['plan'])} | {_pct(rec['success_rate'])} | {rec['frames_used']} | "
                    f"{rec['llm_calls']} ({agents}) | {rec['wall_seconds'] or 0:.0f} | {replayed} |")
    where = (f"on {replays[0]['machine']}, {min(r['date'] for r in replays)} to {max(r['date'] for r in replays)}"
             if replays else "(no replay yet)")
    lines = [TITLE, "", f"Answered by: {'; '.join(sorted(models))}. Recorded with `rlgpt run`, the planner and the "
             "critic pointed at `rlgpt serve llm-relay` (the model saw each request file and nothing else); the "
             "recorded wall time includes the time the model took to answer. Replayed with `make bench-replay` "
             "(`rlgpt run --replay docs/runs/NAME`): every LLM call answered from the record, skills, trainings and "
             f"the final evaluation run live, {where}.", "",
             "| task | record | budgets | plan (decision) | recorded success | recorded frames | LLM calls | "
             "recorded wall s | replayed success | replayed frames | same prompt / replayed calls | replay wall s |",
             "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|", *rows, "", *summary_sentences(pairs), "",
             "Frames: env frames spent on skill tests and trainings (the final evaluation is not counted). Same "
             "prompt: replayed calls whose first message matched the record word for word. Token counts through the "
             "relay are estimates (characters / 4) and are left out."]
    write_section(output, TITLE, "\n".join(lines))
    console.print(f"wrote {output}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    app()
