"""The headline of each current benchmark, from its committed raw results alone: its result in one cell, what it
is measured against, the date, the machine and the LLM. docs/BENCHMARKS.md opens with these rows and the README's
results table is the same table (benchmarks/bench_report.py writes both)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import fmt_pct, joined, markdown_table
from benchmarks.crafter.diamond_results import comparisons, p_text, paired
from benchmarks.crafter.diamond_scorings import headline_text
from benchmarks.crafter.report import LABELS, PUBLISHED_SCORES, held_out_numbers, variant_numbers
from benchmarks.env.numbers import ratios as env_ratios
from benchmarks.game import raw as game_raw
from benchmarks.learner.reading import ratios as learner_ratios
from benchmarks.replay.report import headline_result
from benchmarks.rlgpt import results as rlgpt_results
from benchmarks.rlgpt.runs import fmt_pct as rl_pct
from benchmarks.rlgpt.runs import label
from benchmarks.run.report import final_rate, median_success
from benchmarks.skills import report as skills
from benchmarks.validate import report as validate_report

NONE = "-"


@dataclass(frozen=True)
class Headline:
    """One row of the headline table."""

    bench: str
    """The make target that measures it."""
    result: str
    """The current result, in one cell."""
    anchor: str = NONE
    """What the result is measured against."""
    date: str = NONE
    """When it was measured (UTC)."""
    machine: str = NONE
    """Where: CPU and cores."""
    llm: str = NONE
    """Which LLM answered, where one did."""
    raw: str = NONE
    """The committed raw file(s) it is computed from."""


def table(rows: list[Headline]) -> list[str]:
    """The headline table's markdown lines."""
    return markdown_table(("benchmark", "current result", "against", "date", "machine", "LLM", "raw data"),
                          [(f"`{h.bench}`", h.result, h.anchor, h.date, h.machine, h.llm, h.raw) for h in rows],
                          "lllllll")


def cores(machine: dict[str, Any] | str) -> str:
    """'AMD EPYC, 2 cores' from a machine dict (``machine_info``) or a machine line."""
    if isinstance(machine, str):
        return ", ".join(machine.split(", ")[:2])
    return f"{machine['cpu_model']}, {machine['cpu_count']} cores"


def who(llm: str) -> str:
    """A model as the table names it: its name before the first comma outside parentheses ('Claude (Anthropic)',
    'embedded Gemma 3 270m (gemma-3-270m-q4_k_m.gguf, llama.cpp server)')."""
    depth = 0
    for i, char in enumerate(llm):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            return llm[:i]
    return llm


def raw_cell(*paths: Path) -> str:
    return ", ".join(f"`{p}`" for p in paths)


def env(results: dict[str, Any], raw: Path) -> Headline:
    rel, counts = env_ratios(results), results["machine"]["envs"]

    def path(name: str) -> str:
        return ", ".join(f"{fmt_pct(rel[n].get(name))} at {n}" for n in counts)

    return Headline("make bench-env", f"gRPC unary Step {path('grpc_unary')} envs per session; StreamSteps lockstep "
                    f"{path('grpc_stream_lockstep')}", "in-process Crafter stepping (goal: 85% at 16+ envs)",
                    results["date_utc"], cores(results["machine"]), NONE, raw_cell(raw))


def learner(results: dict[str, Any], raw: Path) -> Headline:
    rel, workers = learner_ratios(results), results["settings"]["num_workers"]

    def fps(variant: str) -> str:
        return f"{results[variant]['fps_second_half']:,.0f} frames/s"

    return Headline(
        "make bench-learner",
        f"APPO with the env in-process {fps('inprocess')} ({rel['inprocess_vs_raw2']:.1%} of raw {workers}-process "
        f"stepping); through one env server {fps('env_server')} ({rel['env_server_vs_inprocess']:.1%} of "
        f"in-process), through 2 env servers {fps('env_servers_2')} ({rel['env_servers_2_vs_inprocess']:.1%})",
        "raw Crafter stepping (goal: 55%); in-process training (goal: 90%)", results["date_utc"],
        cores(results["machine"]), NONE, raw_cell(raw))


def rlgpt(results: dict[str, Any], raw: Path) -> Headline:
    runs = results["runs"]
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    parts = [f"{task}: " + ", ".join(f"{label(r)} {rl_pct(r['success_rate'])}" for r in runs if r["task"] == task)
             for task in tasks]
    return Headline("make bench-rlgpt", "; ".join(parts) + f" ({results['settings']['eval_episodes']} final "
                    f"episodes each, {results['settings']['frames']:,} frames per run)",
                    "the modes against each other, on the same final worlds", rlgpt_results.date_span(results),
                    " and ".join(cores(m) for m in rlgpt_results.distinct(results, "machine")),
                    " and ".join(rlgpt_results.distinct(results, "llm")), raw_cell(raw))


def replay(results: dict[str, Any], raw: Path) -> Headline:
    runs = results["runs"]
    replays = [r["replay"] for r in runs if r.get("replay")]
    models = joined(sorted({who(r["recorded"]["model"]) for r in runs}))
    return Headline("make bench-replay", headline_result(results),
                    "each record's recorded success, frames and prompts",
                    max((r["date"] for r in replays), default=NONE),
                    joined(sorted({cores(r["machine"]) for r in replays})) or NONE, f"{models} (recorded)",
                    raw_cell(raw))


def skills_row(answers: Path, shown: Path) -> Headline:
    meta = skills.load_meta(answers)
    done, first_ok, _, full, mean_first = skills.summary(answers)
    stale = "; stale: the answers answer an older prompt" if meta.get("stale") else ""
    return Headline("make bench-skills", f"{first_ok} of {done} sub-tasks' first skills succeed, {full} at 100%, mean "
                    f"first-attempt success {mean_first:.0%}{stale}", f"{skills.EPISODES} fresh worlds per skill",
                    meta["date_utc"], cores(meta["machine"]), who(meta["model"]),
                    raw_cell(shown / "*.result.json", shown / skills.META))


def diamond(results: dict[str, Any], raw: Path) -> Headline:
    own = "run" if results.get("run") else "agent"
    found = [f"{label_} {100 * result['success_rate']:.1f}% against {chain_label} "
             f"{100 * chain['success_rate']:.1f}% ({diamond_pairs(result, chain)})"
             for label_, result, chain_label, chain in comparisons(results)]
    where = results if own == "run" else results["agent"]
    episodes = next(iter(comparisons(results)))[1]["episodes"]
    return Headline("make bench-diamond", "; ".join(found) + headline_text(results), f"the kept plan's chain alone, "
                    f"on the same {episodes:,} "
                    "held-out worlds", where["date_utc"], cores(where["machine"]),
                    who(results["agent"]["llm"]) if results.get("agent") else NONE, raw_cell(raw))


def diamond_pairs(result: dict[str, Any], chain: dict[str, Any]) -> str:
    if result["ends"] == chain["ends"]:
        return "the chain's own episodes"
    won, lost, p = paired(result, chain)
    return f"{won} worlds won, {lost} lost, McNemar {p_text(p)}"


def diamond_rules(results: dict[str, Any], raw: Path) -> Headline:
    rules = results["run"]["results"]
    chain = rules["chain"]
    cells = [f"`{rule}` {100 * r['success_rate']:.1f}% ({diamond_pairs(r, chain)})" for rule, r in rules.items()
             if rule != "chain"]
    return Headline("make bench-diamond-rules", f"the chain alone {100 * chain['success_rate']:.1f}%; "
                    + "; ".join(cells), f"the chain alone, on the same {chain['episodes']} held-out worlds",
                    results["date_utc"], cores(results["machine"]), who(results["answer_llm"]), raw_cell(raw))


def run(results: dict[str, Any], raw: Path) -> Headline:
    runs = results["runs"]
    rates = " / ".join(f"{final_rate(r):.0%}" for r in runs)
    minutes = [r["wall_seconds"] / 60 for r in runs]
    llms = joined(sorted({r["llm"] for r in runs if r.get("llm")})) or NONE
    return Headline("make bench-run", f"median final success {median_success(results):.0%} over seeds "
                    f"{joined([str(r['seed']) for r in runs])} ({rates}), {min(minutes):.0f}-{max(minutes):.0f} min "
                    "each", f"the bar: median {results['criteria']['median_success']:.0%} within "
                    f"{results['criteria']['minutes']} min", results["date_utc"], cores(results["machine"]), llms,
                    raw_cell(raw))


def llm(results: dict[str, Any], raw: Path) -> Headline:
    models = results["models"] if isinstance(results, dict) else results
    cells = [f"{m['model']}: valid plans {fmt_pct(m['valid_plan_rate'])}, skills passing their test "
             f"{fmt_pct(m['skill_passes_rate'])}" for m in models]
    return Headline("make bench-llm", "; ".join(cells), "each other, on the same sub-tasks and worlds",
                    results.get("date_utc", NONE), cores(results.get("machine", NONE)),
                    joined([m["model"] for m in models]), raw_cell(raw))


def game(docs: list[dict[str, Any]], raw: tuple[Path, ...]) -> Headline:
    """bench-game's row: each run's latest scoring on the whole game, recomputed from its episodes (no APPO row
    has per-episode data yet)."""
    cells, dates, llms, machines = [], [], [], []
    for doc in docs:
        scorings = [s for s in doc.get("scorings", []) if game_raw.scored(s)]
        if not scorings:
            continue
        n, last = game_raw.numbers(scorings[-1]), scorings[-1]
        task = str(doc.get("run", {}).get("task", ""))
        # A run whose task is one achievement: its success on these worlds comes first (the score is a side view).
        rate = ""
        if task in last.get("achievements", []):
            solved = sum(task in e["achievements"] for e in last["episodes"])
            rate = f"{task} in {solved / len(last['episodes']):.1%} ({solved}/{len(last['episodes'])}), "
        cells.append(f"{doc['name']}: {rate}score {n['score']:.1f} over {n['episodes']} held-out episodes")
        dates.append(scorings[-1].get("scored_utc", NONE))
        llms.append(who(str(doc.get("run", {}).get("llm", NONE))))
        machines += [cores(scorings[-1]["machine"])] if scorings[-1].get("machine") else []
    published = ", ".join(f"{name} {score}" for name, score in PUBLISHED_SCORES.items())
    return Headline("make bench-game", "; ".join(cells) or "no scoring yet", f"published at 1M frames: {published}",
                    max(dates, default=NONE), joined(sorted(set(machines))) or NONE,
                    joined(sorted(set(llms))) or NONE, raw_cell(*raw))


def crafter(results: dict[str, Any], raw: Path) -> Headline:
    """bench-crafter's row, each variant's numbers recomputed from its episodes (none without per-episode data)."""
    cells = []
    for r in results["variants"].values():
        numbers, held = variant_numbers(r), held_out_numbers(r)
        cells.append(f"{LABELS.get(r['variant'], r['variant'])} "
                     + (f"score {numbers['score']:.1f}" if numbers else "no per-episode data")
                     + (f" (held-out {held['score']:.1f})" if held else ""))
    return Headline("make bench-crafter", "; ".join(cells), f"published at 1M frames: PPO {PUBLISHED_SCORES['PPO']}",
                    results["date_utc"], cores(results["machine"]), NONE, raw_cell(raw))


def validate(results: dict[str, Any], raw: Path) -> Headline:
    """bench-validate's row: its latest arm against its run's first, on the same validation worlds."""
    arms = results.get("arms", [])
    last = arms[-1] if arms else {}
    return Headline("make bench-validate", validate_report.latest_change(results), "the run's first arm, paired",
                    str(last.get("date_utc", NONE))[:10], cores(last["machine"]) if "machine" in last else NONE,
                    "none (recorded code)", raw_cell(raw))
