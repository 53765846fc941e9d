"""bench-replay's section of docs/BENCHMARKS.md and its headline, written from the raw results alone
(docs/results/bench-replay.json: per kept run, its recorded numbers and its latest replay's), so ``report`` rebuilds
them with no replay. The records of the withdrawn agent ablation are listed apart, as the withdrawal's evidence.
"""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any

from benchmarks.common import joined, markdown_table
from benchmarks.replay.causes import named_causes, other_text

TITLE = "## RL-GPT with a capable model through the relay, replayed (make bench-replay)"
RAW = Path("docs/results/bench-replay.json")
SUBTASK_PASS = 0.8
"""The test success at which the section counts a sub-task as passed (the planner's default target_success)."""
WITHDRAWN_PREFIX = "claude-relay-ablation-"
"""Kept records of the agent ablation withdrawn on 2026-11-28 (see the bench-rlgpt section, docs/benchmarks/frozen.md):
kept as the withdrawal's evidence, not results."""
OWN_FINAL = "the run's own final evaluation, not held-out"
"""What a whole-game run's recorded score is: its final evaluation on the run's final worlds (the Crafter section has
its held-out score)."""
LOAD = re.compile(r"load average ([0-9.]+)")
"""The load average a machine description ends with."""
_BUDGET_NAMES = {"max_outer_iterations": "O", "max_inner_iterations": "I", "env_frames_per_training":
                 "frames/training", "total_env_frames": "frames in all", "eval_episodes": "E", "candidates": "N"}
RESULT_HEADER = ("task", "record", "budgets", "plan (decision)", "recorded success", "recorded frames",
                 "recorded wall s", "replayed success", "replayed frames", "replay wall s", "replay is")
PROMPT_HEADER = ("record", "recorded success", "recorded calls", "replayed calls", "with the recorded prompt",
                 "not made", "answered with another call's record", "what changed")


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def measure_key(recorded: dict[str, Any]) -> str:
    """What a record is measured by: ``score`` for a whole-game run (no success condition), else ``success_rate``."""
    return "score" if recorded.get("score") is not None else "success_rate"


def measure_text(numbers: dict[str, Any], key: str = "") -> str:
    """A record's or a replay's measure (``key``, default the numbers' own): the final success, or a whole-game
    run's score in its own final evaluation, said not held-out (held-out scores are bench-game's)."""
    key = key or measure_key(numbers)
    value = numbers.get(key)
    if key == "success_rate":
        return pct(value)
    return "-" if value is None else f"score {value:.1f} ({OWN_FINAL})"


def budgets_text(budgets: dict[str, int]) -> str:
    return ", ".join(f"{_BUDGET_NAMES.get(k, k)}={v}" for k, v in budgets.items()) or "the planner's defaults"


def withdrawn(run: dict[str, Any]) -> bool:
    return run["name"].startswith(WITHDRAWN_PREFIX)


def drifted(replay: dict[str, Any]) -> bool:
    """Whether a replay is no longer of its record: a prompt not the recorded one, a recorded call not made, a call
    answered with another call's record, or an error that stopped it."""
    return (replay["same_prompt"] < replay["recorded_calls"] or bool(replay.get("answered_elsewhere"))
            or bool(replay.get("error")))


def verdict(run: dict[str, Any]) -> str:
    """What a run's replay is: not replayed; drifted (its success is that of the recorded answers to other prompts,
    no reproduction); reproduced (same prompts, success and frames; a whole-game run: score and frames); or
    different (same prompts, another result)."""
    rec, rep = run["recorded"], run.get("replay")
    if not rep:
        return "not replayed"
    if drifted(rep):
        return "drifted"
    key = measure_key(rec)
    if rep.get(key) == rec.get(key) and rep["frames_used"] == rec["frames_used"]:
        return "reproduced"
    return "different"


def _agents(counts: dict[str, int]) -> str:
    return ", ".join(f"{a} {n}" for a, n in sorted(counts.items()) if n) or "none"


def drift_summary(replay: dict[str, Any]) -> str:
    """One line: the calls with the recorded prompt, the calls not made or answered elsewhere, what changed."""
    named, other = named_causes(replay.get("changes", []))
    parts = [f"{replay['same_prompt']} of {replay['recorded_calls']} recorded calls replayed with the recorded prompt "
             f"({replay['replayed_calls']} replayed)"]
    if replay.get("not_made"):
        parts.append(f"not made: {_agents(replay['not_made'])}")
    if replay.get("answered_elsewhere"):
        parts.append(f"{len(replay['answered_elsewhere'])} answered with another call's record")
    parts += list(named) + [other_text(c) for c in other[:3]]
    if replay.get("error"):
        parts.append(f"stopped: {replay['error']}")
    return "; ".join(parts)


def _result_row(run: dict[str, Any]) -> list[str]:
    rec, rep = run["recorded"], run.get("replay")
    wall = "-" if rec.get("wall_seconds") is None else f"{rec['wall_seconds']:.0f}"
    replayed = [measure_text(rep, measure_key(rec)), str(rep["frames_used"]), f"{rep['wall_seconds']:.0f}"
                ] if rep else ["-"] * 3
    return [rec["task"], f"`docs/runs/{run['name']}`", budgets_text(rec["budgets"]), "; ".join(rec["plan"]),
            measure_text(rec), str(rec["frames_used"]), wall, *replayed, verdict(run)]


def legend(runs: list[dict[str, Any]]) -> dict[str, str]:
    """A letter per known prompt edit found in any replay, in first-seen order, the current records before the
    withdrawn ones (the tables name edits by letter)."""
    found: dict[str, None] = {}
    for run in sorted(runs, key=withdrawn):
        found |= dict.fromkeys(named_causes((run.get("replay") or {}).get("changes", []))[0])
    return {words: (string.ascii_uppercase + string.ascii_lowercase)[i] for i, words in enumerate(found)}


def changed_text(replay: dict[str, Any], letters: dict[str, str]) -> str:
    """A record's prompt changes: each known edit's letter with the calls it was seen in, then the other changed
    lines (counted; the first one quoted)."""
    named, other = named_causes(replay.get("changes", []))
    parts = [f"{letters[words]} ({calls})" for words, calls in sorted(named.items(), key=lambda n: letters[n[0]])]
    others = len(other) + replay.get("changes_left_out", 0)
    if others:
        parts.append(f"{others} other changed line{'s' if others > 1 else ''}, e.g. {other_text(other[0])}"
                     if other else f"{others} other changed lines")
    return ", ".join(parts) or "-"


def _prompt_row(run: dict[str, Any], letters: dict[str, str]) -> list[str]:
    rec, rep = run["recorded"], run.get("replay")
    first = [f"`{run['name']}`", measure_text(rec), f"{rec['llm_calls']} ({_agents(rec['llm_calls_by_agent'])})"]
    if not rep:
        return first + ["-"] * 5
    elsewhere = len(rep.get("answered_elsewhere", []))
    stopped = f"; stopped: {rep['error']}" if rep.get("error") else ""
    not_made = _agents(rep.get("not_made", {})).replace("none", "0")
    return [*first, str(rep["replayed_calls"]), str(rep["same_prompt"]), not_made, str(elsewhere),
            changed_text(rep, letters) + stopped]


def _subtasks_text(rec: dict[str, Any]) -> str:
    """How many of a record's sub-tasks reached a test success of at least SUBTASK_PASS, and those that did not."""
    best = rec.get("subtask_best", {})
    passed = [n for n, r in best.items() if r >= SUBTASK_PASS]
    failed = ", ".join(f"{n} (best {r:.0%})" for n, r in best.items() if r < SUBTASK_PASS)
    share = f" ({len(passed) / len(best):.0%})" if best else ""
    return (f"{len(passed)} of {len(best)} sub-tasks{share} reached a test success of at least {SUBTASK_PASS:.0%}"
            + (f", not {failed}" if failed else ""))


def summary_sentences(runs: list[dict[str, Any]]) -> list[str]:
    """What the tables show, each number what it says: solved tasks, unsolved runs' sub-tasks, the replays by
    verdict, the records not replayed."""
    out = []
    games = [r for r in runs if measure_key(r["recorded"]) == "score"]
    goals = [r for r in runs if measure_key(r["recorded"]) != "score"]
    solved = [r["recorded"]["task"] for r in goals if (r["recorded"]["success_rate"] or 0) > 0]
    if solved:
        out.append(f"{len(solved)} of {len(goals)} recorded runs{' with a success condition' if games else ''} "
                   f"solved their task ({', '.join(dict.fromkeys(solved))}).")
    for run in runs:
        rec = run["recorded"]
        if measure_key(rec) == "score":
            out.append(f"{rec['task']} (`{run['name']}`), a whole-game run (no success condition), scored "
                       f"{rec['score']:.1f} in {OWN_FINAL} (its held-out score is bench-game's, in the Crafter "
                       f"section); {_subtasks_text(rec)}.")
        elif not (rec["success_rate"] or 0) > 0:
            out.append(f"{rec['task']} (`{run['name']}`) ended at {pct(rec['success_rate'])} over the final "
                       f"episodes; {_subtasks_text(rec)}.")
    verdicts = [verdict(r) for r in runs]
    replayed = [v for v in verdicts if v != "not replayed"]
    if replayed:
        measure = "final success (a whole-game run: its score)" if games else "final success"
        out.append(f"Replayed with no model: {len(replayed)} of {len(runs)} records; "
                   f"{replayed.count('reproduced')} reproduced the recorded {measure} and frame count with every "
                   f"recorded prompt word for word, {replayed.count('drifted')} drifted (their success is that of the "
                   "recorded answers to other prompts, not a reproduction), "
                   f"{replayed.count('different')} replayed the recorded prompts to another result.")
    else:
        out.append("No record has been replayed yet.")
    if len(replayed) < len(runs):
        out.append("Not replayed since the prompt check: " + ", ".join(
            f"`{r['name']}`" for r, v in zip(runs, verdicts, strict=True) if v == "not replayed") + ".")
    return out


def _where(runs: list[dict[str, Any]]) -> str:
    """The replays' machines (each once, its load left out) with the range of load averages, and their dates."""
    replays = [r["replay"] for r in runs if r.get("replay")]
    if not replays:
        return "(no replay yet)"
    machines = "; ".join(dict.fromkeys(r["machine"].split(", load average")[0] for r in replays))
    loads = [float(m.group(1)) for r in replays if (m := LOAD.search(r["machine"]))]
    load = f" (load average {min(loads):.1f} to {max(loads):.1f} at the replays' starts)" if loads else ""
    return f"on {machines}{load}, {min(r['date'] for r in replays)} to {max(r['date'] for r in replays)}"


def _calls(runs: list[dict[str, Any]]) -> tuple[int, int, int]:
    reps = [r["replay"] for r in runs if r.get("replay")]
    return (sum(r["recorded_calls"] for r in reps), sum(r["replayed_calls"] for r in reps),
            sum(r["same_prompt"] for r in reps))


def headline_result(results: dict[str, Any]) -> str:
    """The headline's result cell: the kept runs replayed, their calls with the recorded prompt, their verdicts, and
    the withdrawn records apart."""
    runs = [r for r in results["runs"] if not withdrawn(r)]
    old = [r for r in results["runs"] if withdrawn(r)]
    verdicts = [verdict(r) for r in runs]
    recorded, _, same = _calls(runs)
    text = (f"{len(runs)} kept runs ({joined(list(dict.fromkeys(r['recorded']['task'] for r in runs)))}): "
            + joined([f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts)])
            + f"; {same} of {recorded} recorded calls replayed with the recorded prompt"
            + (" (prompts edited since the records, each edit listed in the section)" if same < recorded else ""))
    if old:
        old_recorded, _, old_same = _calls(old)
        text += (f"; {len(old)} record{'s' if len(old) > 1 else ''} of the withdrawn ablation: {old_same} of "
                 f"{old_recorded} calls with the recorded prompt")
    return text


def render_section(results: dict[str, Any]) -> str:
    """The whole section, from the raw results."""
    every = results["runs"]
    runs, old = [r for r in every if not withdrawn(r)], [r for r in every if withdrawn(r)]
    letters = legend(every)
    models = "; ".join(sorted({r["recorded"]["model"] for r in runs}))
    lines = [TITLE, "", f"Answered by: {models}. Recorded with `rlgpt run`, the planner and the critic pointed at "
             "`rlgpt serve llm-relay` (the model saw each request file and nothing else); the recorded wall time "
             "counts the whole run, from the start of its first LLM call, and includes the time the model took to "
             "answer. Replayed with `make bench-replay` (`rlgpt run --replay docs/runs/NAME`): every LLM call "
             "answered from the record, skills, trainings and the final evaluation run live, the critic asking its "
             f"LLM about passed attempts too where the record's did, {_where(every)}. Raw results: "
             f"`{results.get('raw', RAW)}` (`python -m benchmarks.bench_replay report` rebuilds this section).", "",
             *markdown_table(RESULT_HEADER, [_result_row(r) for r in runs], "llllrrrrrrl"), "",
             *summary_sentences(runs), "Frames: env frames of skill tests and trainings (the final evaluation is "
             "not counted)" + ("; a whole-game run's: its whole spend, every evaluation included." if any(
                 measure_key(r["recorded"]) == "score" for r in runs) else "."), "",
             "Prompts, per record. A replayed call is a recorded call the replay made for the same purpose "
             "(iteration, sub-task, agent); with the recorded prompt: every message the record's word for word; not "
             "made: recorded calls the replay never made; answered with another call's record: the replay answers an "
             "agent's n-th call with its n-th recorded answer, so a skipped call shifts the rest. Token counts through "
             "the relay are estimates (characters / 4) and are left out.", "",
             *markdown_table(PROMPT_HEADER, [_prompt_row(r, letters) for r in runs], "lrlrrlrl")]
    if old:
        lines += ["", "Withdrawn records, kept as the withdrawal's evidence (the 2026-11-23 agent ablation: one model "
                  "instance, one shared skill library; see the bench-rlgpt section and `docs/benchmarks/frozen.md`), "
                  "not results:", "", *markdown_table(PROMPT_HEADER, [_prompt_row(r, letters) for r in old],
                                                      "lrlrrlrl")]
    if letters:
        lines += ["", "What changed in the prompts since the records (in the tables, a letter's number: the calls "
                  "that show it): " + "; ".join(f"{letter}: {words}" for words, letter in letters.items()) + "."]
    return "\n".join(lines)
