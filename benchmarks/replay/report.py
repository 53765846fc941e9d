"""bench-replay's section of docs/BENCHMARKS.md, written from the raw results alone (docs/results/bench-replay.json:
per kept run, its recorded numbers and its latest replay's), so ``report`` rebuilds it with no replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import markdown_table
from benchmarks.replay.drift import drift_reason

TITLE = "## RL-GPT with a capable model through the relay, replayed (make bench-replay)"
RAW = Path("docs/results/bench-replay.json")
SUBTASK_PASS = 0.8
"""The test success at which the section counts a sub-task as passed (the planner's default target_success)."""
_BUDGET_NAMES = {"max_outer_iterations": "O", "max_inner_iterations": "I", "env_frames_per_training":
                 "frames/training", "total_env_frames": "frames in all", "eval_episodes": "E", "candidates": "N"}
HEADER = ("task", "record", "budgets", "plan (decision)", "recorded success", "recorded frames", "LLM calls",
          "recorded wall s", "replayed success", "replayed frames", "replayed calls", "with the recorded prompt",
          "replay wall s", "replay is")


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def budgets_text(budgets: dict[str, int]) -> str:
    return ", ".join(f"{_BUDGET_NAMES.get(k, k)}={v}" for k, v in budgets.items()) or "the planner's defaults"


def verdict(run: dict[str, Any]) -> str:
    """What a run's replay is: not replayed; drifted (its prompts are not the recorded ones, or calls were left
    unreplayed: its success is no reproduction); reproduced (same prompts, success and frames); or different."""
    rec, rep = run["recorded"], run.get("replay")
    if not rep:
        return "not replayed"
    if drift_reason(rep):
        return "drifted"
    if rep["success_rate"] == rec["success_rate"] and rep["frames_used"] == rec["frames_used"]:
        return "reproduced"
    return "different"


def _row(run: dict[str, Any]) -> list[str]:
    rec, rep = run["recorded"], run.get("replay")
    agents = ", ".join(f"{a} {n}" for a, n in sorted(rec["llm_calls_by_agent"].items()))
    wall = "-" if rec.get("wall_seconds") is None else f"{rec['wall_seconds']:.0f}"
    replayed = ([pct(rep["success_rate"]), str(rep["frames_used"]), f"{rep['replayed_calls']} of "
                 f"{rep['recorded_calls']}", str(rep["same_prompt"]), f"{rep['wall_seconds']:.0f}"]
                if rep else ["-"] * 5)
    return [rec["task"], f"`docs/runs/{run['name']}`", budgets_text(rec["budgets"]), "; ".join(rec["plan"]),
            pct(rec["success_rate"]), str(rec["frames_used"]), f"{rec['llm_calls']} ({agents})", wall, *replayed,
            verdict(run)]


def summary_sentences(runs: list[dict[str, Any]]) -> list[str]:
    """What the table shows, each number what it says: solved tasks, unsolved runs' sub-tasks, the replays by
    verdict, and one line per drifted record with its reason."""
    out = []
    solved = [r["recorded"]["task"] for r in runs if (r["recorded"]["success_rate"] or 0) > 0]
    if solved:
        tasks = ", ".join(dict.fromkeys(solved))
        out.append(f"{len(solved)} of {len(runs)} recorded runs solved their task ({tasks}).")
    for run in runs:
        rec = run["recorded"]
        if (rec["success_rate"] or 0) > 0:
            continue
        best = rec.get("subtask_best", {})
        passed = [n for n, r in best.items() if r >= SUBTASK_PASS]
        failed = ", ".join(f"{n} (best {r:.0%})" for n, r in best.items() if r < SUBTASK_PASS)
        share = f" ({len(passed) / len(best):.0%})" if best else ""
        out.append(f"{rec['task']} (`{run['name']}`) ended at {pct(rec['success_rate'])} over the final episodes; "
                   f"{len(passed)} of {len(best)} sub-tasks{share} reached a test success of at least "
                   f"{SUBTASK_PASS:.0%}" + (f", not {failed}" if failed else "") + ".")
    verdicts = [verdict(r) for r in runs]
    replayed = [v for v in verdicts if v != "not replayed"]
    if replayed:
        out.append(f"Replayed with no model: {len(replayed)} of {len(runs)} records; "
                   f"{replayed.count('reproduced')} reproduced the recorded final success and frame count with every "
                   f"recorded prompt word for word, {replayed.count('drifted')} drifted (their success is that of the "
                   "recorded answers to other prompts, not a reproduction), "
                   f"{replayed.count('different')} replayed the recorded prompts to another result.")
    else:
        out.append("No record has been replayed yet.")
    if len(replayed) < len(runs):
        out.append("Not replayed since the prompt check: "
                   + ", ".join(f"`{r['name']}`" for r, v in zip(runs, verdicts, strict=True) if v == "not replayed")
                   + ".")
    out += [f"- Drifted: `{r['name']}`: {drift_reason(r['replay'])}."
            for r, v in zip(runs, verdicts, strict=True) if v == "drifted"]
    return out


def _where(runs: list[dict[str, Any]]) -> str:
    replays = [r["replay"] for r in runs if r.get("replay")]
    if not replays:
        return "(no replay yet)"
    machines = "; ".join(dict.fromkeys(r["machine"] for r in replays))
    return f"on {machines}, {min(r['date'] for r in replays)} to {max(r['date'] for r in replays)}"


def render_section(results: dict[str, Any]) -> str:
    """The whole section, from the raw results."""
    runs = results["runs"]
    models = "; ".join(sorted({r["recorded"]["model"] for r in runs}))
    lines = [TITLE, "", f"Answered by: {models}. Recorded with `rlgpt run`, the planner and the critic pointed at "
             "`rlgpt serve llm-relay` (the model saw each request file and nothing else); the recorded wall time "
             "counts the whole run, from the start of its first LLM call, and includes the time the model took to "
             "answer. Replayed with `make bench-replay` (`rlgpt run --replay docs/runs/NAME`): every LLM call "
             f"answered from the record, skills, trainings and the final evaluation run live, {_where(runs)}. "
             f"Raw results: `{results.get('raw', RAW)}` (`python -m benchmarks.bench_replay report` rebuilds this "
             "section from it).", "", *markdown_table(HEADER, [_row(r) for r in runs], "llllrrlrrrrrrl"), "",
             *summary_sentences(runs), "",
             "Frames: env frames spent on skill tests and trainings (the final evaluation is not counted). Replayed "
             "calls: the recorded calls the replay made (the n-th call of an agent gets that agent's n-th recorded "
             "answer, whatever its prompt). With the recorded prompt: replayed calls whose every message matched the "
             "record word for word; where one does not, the record drifted (the prompts changed since it was "
             "recorded, or a live result did), and the first differing line is quoted. Token counts through the relay "
             "are estimates (characters / 4) and are left out."]
    return "\n".join(lines)
