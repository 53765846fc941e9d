"""bench-game's rows of the Crafter section, from its raw files alone (benchmarks/game/raw.py): one row per scoring
(declared sets not scored yet included, so that every scoring made is listed), how its episodes ended, and its
achievements' rates as a series for the section's table and plot (benchmarks/crafter/report.py puts them beside
bench-crafter's rows)."""

from __future__ import annotations

import math
from typing import Any

from benchmarks.common import markdown_table
from benchmarks.crafter.paired import Evaluation, evaluation
from benchmarks.game.raw import numbers, scored

COMMAND = 'make bench-game BENCH_GAME_ARGS="--run DIR --episodes 256"'
INTRO = (
    "**RL-GPT's final controllers on the whole game** (`make bench-game`): a finished run's final controller, as "
    "its state.json records it (a chain of coded skills and policies, or a trained policy), played with the "
    "learner's evaluation code on held-out worlds declared before scoring (set k of a run: "
    "`rlgpt/worlds.py` `game_bench_worlds`, checked apart from every world the run trained or was evaluated on), "
    "one episode per world, Crafter's episodes (10,000 frames or death), whatever task the run had. Score and "
    "rates are computed from the committed per-episode raw data (`docs/bench-raw/game/<name>/results.json`) by "
    "`rlgpt/game_score.py`. A set is scored once; every scoring made is listed, declared sets not scored too. The "
    "run's frames, LLM calls, tokens and wall time are the run's own (its whole 1M-frame budget for a crafter "
    "run); the wall time runs from its first LLM call to its end, pauses between sessions included. How a record "
    "was made, and what was not regular in it: its folder under `docs/runs/` (NOTES.md, where it has one).")


def label(doc: dict[str, Any], scoring: dict[str, Any]) -> str:
    return f"RL-GPT {doc['name']}, set {scoring['set']}"


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


def _worlds(scoring: dict[str, Any]) -> str:
    first = int(scoring["first_seed"])
    return f"{first:,}..{first + int(scoring['episodes_declared']) - 1:,}"


def _row(doc: dict[str, Any], scoring: dict[str, Any]) -> tuple[object, ...]:
    run, n = doc["run"], numbers(scoring)
    wall = run.get("wall_seconds")
    score = f"{n['score']:.1f}" if scored(scoring) else "not scored"
    deaths = sum(n["deaths"].values())
    return (label(doc, scoring), doc["controller"]["kind"], run.get("llm") or "-", _worlds(scoring),
            scoring.get("declared_utc", "-"), f"{n['episodes']} of {scoring['episodes_declared']}", score,
            _cell(n["mean_length"], ",.0f"), f"{deaths} of {n['episodes']}" if scored(scoring) else "-",
            _cell(run.get("frames_used"), ","), _cell(run.get("llm_calls"), ","), _cell(run.get("tokens"), ","),
            "-" if wall is None else f"{wall / 60:.0f}")


def _ended(doc: dict[str, Any], scoring: dict[str, Any]) -> str:
    n = numbers(scoring)
    ends = ", ".join(f"{why or 'unknown'} {count}" for why, count in n["ends"].items())
    causes = ", ".join(f"{cause} {count}" for cause, count in n["deaths"].items()) or "none"
    never = [name for name, rate in n["rates"].items() if rate == 0.0]
    length = int(scoring.get("episode_length", 10_000))
    short = "" if length == 10_000 else f" Episodes of at most {length:,} frames, not the benchmark's 10,000."
    return (f"{label(doc, scoring)} ({doc['run']['task']} run `{doc['run']['dir']}`, controller "
            f"{doc['controller']['recorded']!r}): episodes ended by {ends}; death causes: {causes}; "
            f"{len(n['rates']) - len(never)} of {len(n['rates'])} achievements unlocked at least once"
            + (f" (never: {', '.join(never)})" if never else "") + f"; scored {scoring.get('scored_utc', '-')}."
            + short)


def game_lines(docs: list[dict[str, Any]]) -> list[str]:
    """The RL-GPT part of the Crafter section: the intro, a row per scoring, how each scored set's episodes ended."""
    scorings = [(doc, s) for doc in docs for s in doc.get("scorings", [])]
    if not scorings:
        return [INTRO, "", f"No run has been scored on the whole game yet: `{COMMAND}` scores one."]
    lines = [INTRO, "", *markdown_table(
        ("controller", "kind", "LLM", "held-out worlds (declared)", "declared", "episodes", "score",
         "mean episode frames", "deaths", "run's frames", "LLM calls", "tokens", "run's wall min"),
        [_row(doc, s) for doc, s in scorings]), ""]
    lines += [_ended(doc, s) for doc, s in scorings if scored(s)]
    return lines


def game_series(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each scored set as a series of the section's achievements table and plot: label, rates, score."""
    return [{"label": label(doc, s), "rates": (n := numbers(s))["rates"], "score": n["score"], "note": ""}
            for doc in docs for s in doc.get("scorings", []) if scored(s)]


def game_evaluations(docs: list[dict[str, Any]]) -> list[Evaluation]:
    """Each scored set's episodes, for the section's paired comparisons."""
    return [evaluation(label(doc, s), s["achievements"], s["episodes"])
            for doc in docs for s in doc.get("scorings", []) if scored(s)]
