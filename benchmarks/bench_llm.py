"""`make bench-llm`: the embedded local models on this project's own prompts.

For each model and each of a fixed set of Crafter sub-tasks: does the slow agent return a valid plan,
does the fast agent's skill pass the sandbox (registers), and does it pass its test episodes; how many of those
test episodes the critic's dead-loop check flags (``benchmarks/llm/dead_loops.py``: the critic's own function, the
paper's "dead loop" rate per LLM); plus tokens/s and seconds per agent call. The results are saved in
``docs/bench-raw/llm/results.json`` and the section (``benchmarks/llm/report.py``) goes into docs/BENCHMARKS.md;
``--report-only`` rebuilds it from the saved results.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks.common import load_results, machine_description, save_results, utc_now, write_section
from benchmarks.llm.dead_loops import critic_repeats, episode_loops
from benchmarks.llm.report import TITLE, render
from rlgpt.app.launcher import start_service
from rlgpt.config import LLMSettings
from rlgpt.grpc_client import create_channel
from rlgpt.llm import LLMClient
from rlgpt.llm.local_server import MODEL_ALIAS, MODEL_PACKAGES, LocalLLMServer
from rlgpt.prompts import copies_template
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, planner_pb2
from services.planner.agents.fast import FastAgent
from services.planner.agents.slow import SlowAgent
from services.planner.plan_rules import plan_violations, repair_plan
from services.planner.plans import start_inventory
from services.planner.program_code import program_of
from services.planner.program_writer import resolve_skill_format
from services.planner.prompts import PROMPT_DIR
from services.planner.skill_library import SkillLibrary

log = logging.getLogger("bench_llm")
console = Console(stderr=True)


# (sub-task, description, success achievement); the start inventory of each skill test comes from the game's
# rules (chain_start), never typed here.
SUBTASKS: list[tuple[str, str, str]] = [
    ("collect_wood", "collect wood from a tree", "collect_wood"),
    ("place_table", "place a crafting table", "place_table"),
    ("make_wood_pickaxe", "make a wood pickaxe", "make_wood_pickaxe"),
    ("make_wood_sword", "make a wood sword", "make_wood_sword"),
    ("collect_sapling", "collect a sapling from grass", "collect_sapling"),
    ("place_plant", "plant a sapling", "place_plant"),
    ("make_stone_sword", "make a stone sword", "make_stone_sword"),
    ("collect_stone", "mine stone", "collect_stone"),
    ("place_stone", "place a stone block", "place_stone"),
    ("collect_coal", "mine coal", "collect_coal"),
    ("make_stone_pickaxe", "make a stone pickaxe", "make_stone_pickaxe"),
    ("place_furnace", "place a furnace", "place_furnace"),
]


SLOW_TEMPLATE = PROMPT_DIR / "slow_agent.txt"
FAST_TEMPLATES = {"python": PROMPT_DIR / "fast_agent_code.txt", "program": PROMPT_DIR / "fast_agent_program.txt"}


def chain_start(task: common_pb2.TaskSpec, describe: env_pb2.DescribeResponse) -> list[common_pb2.ItemCount]:
    """Where the task's skill test starts, as the planner's would in a plan: what the sub-tasks of the rules' chain
    before the task's own step leave in the inventory (plans.start_inventory on the repaired plan): the wood
    pickaxe is held when a stone sword is made."""
    plan = repair_plan(planner_pb2.Plan(), task, describe.rules, set(describe.items))
    return start_inventory(plan, plan.subtasks[-1], describe.rules, set(describe.items))


def measure_model(model: str, env_target: str, work: Path, episodes: int, steps: int,
                  repeats: int, skill_format: str = "auto", candidates: int = 1) -> dict[str, Any]:
    """One model on every sub-task; ``repeats``: the critic's dead-loop length; ``skill_format`` as
    RLGPT_SKILL_FORMAT (auto: a skill program, the embedded models' format); ``candidates``: skills drawn per
    sub-task, the best by its test kept (the planner's verified candidates)."""
    settings = LLMSettings(local_model=model, max_retries=1, timeout_seconds=300, max_tokens=768)
    rows: list[dict[str, Any]] = []
    with LocalLLMServer(settings, log_path=work / f"{model}-server.log") as server:
        llm = LLMClient(LLMSettings(**{**settings.__dict__, "model": MODEL_ALIAS}), base_url=server.base_url,
                        record_dir=work / model / "llm", structured="json_object")
        env = env_pb2_grpc.EnvServiceStub(create_channel(env_target, default_timeout=600, wait_ready_seconds=30))
        describe = env.Describe(env_pb2.DescribeRequest())
        library = SkillLibrary(work / model / "library.json")
        skill_format = resolve_skill_format(skill_format, MODEL_ALIAS, describe)
        # As the planner does for programs (small models): names from the goal's prerequisites.
        slow = SlowAgent(llm, describe, library, closed_names=skill_format == "program")
        fast = FastAgent(llm, env, describe, library, test_episodes=episodes, test_steps=steps, seed=0,
                         skill_format=skill_format)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console) as progress:
            bar = progress.add_task(f"{model}", total=len(SUBTASKS))
            for name, description, achievement in SUBTASKS:
                row: dict[str, Any] = {"subtask": name}
                task = common_pb2.TaskSpec(name=achievement, description=description,
                                           success=[common_pb2.Condition(achievement=achievement)])
                start = chain_start(task, describe)
                try:
                    plan, record = slow.plan(task)
                    violations = plan_violations(plan, task, describe.rules, set(describe.items))
                    row.update(plan_valid=True, plan_seconds=record.latency_seconds,
                               plan_tokens=record.completion_tokens, plan_attempts=record.attempts,
                               plan_copied=copies_template(record.parsed, SLOW_TEMPLATE),
                               plan_follows_rules=not violations,
                               plan_violation=violations[0][:300] if violations else "")
                except Exception as exc:  # an invalid answer is a measurement, not a crash
                    row.update(plan_valid=False, plan_error=f"{type(exc).__name__}: {exc}"[:300])
                subtask = planner_pb2.SubTask(name=name, description=description,
                                              success=[common_pb2.Condition(achievement=achievement)])
                started = time.perf_counter()
                best = fast.write_skill(subtask, start_inventory=start, candidates=candidates)[0]
                row.update(skill_seconds=time.perf_counter() - started, skill_valid_json=best.answer is not None,
                           skill_compiles=best.success_rate >= 0, skill_passes=best.success_rate > 0,
                           skill_success_rate=max(0.0, best.success_rate),
                           skill_error=(f"{best.error.type}: {best.error.message}"[:300] if best.error else ""),
                           skill_format=skill_format,
                           skill_copied=copies_template(best.record.parsed if best.record else None,
                                                       FAST_TEMPLATES[skill_format]),
                           skill_program=program_of(best.answer.code) if best.answer else None,
                           skill_tokens=best.record.completion_tokens if best.record else 0,
                           skill_llm_seconds=best.record.latency_seconds if best.record else 0.0,
                           **episode_loops(best.episodes, repeats))
                rows.append(row)
                progress.advance(bar)
        ledger = llm.ledger.by_agent
    completion = sum(v["completion_tokens"] for v in ledger.values())
    seconds = sum(v["seconds"] for v in ledger.values())
    calls = sum(v["calls"] for v in ledger.values())
    n = len(rows)
    test_episodes = sum(r["episodes"] for r in rows)
    return {
        "model": model, "package": MODEL_PACKAGES[model][1], "rows": rows,
        "valid_plan_rate": sum(r["plan_valid"] for r in rows) / n,
        "plan_rules_rate": sum(r.get("plan_follows_rules", False) for r in rows) / n,
        "plan_copy_rate": sum(r.get("plan_copied", False) for r in rows) / n,
        "skill_copy_rate": sum(r.get("skill_copied", False) for r in rows) / n,
        "skill_format": skill_format, "candidates": candidates,
        "skill_json_rate": sum(r["skill_valid_json"] for r in rows) / n,
        "skill_compiles_rate": sum(r["skill_compiles"] for r in rows) / n,
        "skill_passes_rate": sum(r["skill_passes"] for r in rows) / n,
        "test_episodes": test_episodes, "dead_loop_episodes": sum(r["dead_loop_episodes"] for r in rows),
        "dead_loop_idle_episodes": sum(r["idle_episodes"] for r in rows),
        "completion_tokens_per_second": completion / seconds if seconds else 0.0,
        "seconds_per_call": seconds / calls if calls else 0.0, "calls": calls,
        "slow_seconds_per_call": ledger["slow"]["seconds"] / max(1, ledger["slow"]["calls"]),
        "fast_seconds_per_call": ledger["fast"]["seconds"] / max(1, ledger["fast"]["calls"]),
    }


def main(
    output: Annotated[Path, typer.Option(help="Markdown file to update.")] = Path("docs/BENCHMARKS.md"),
    models: Annotated[str, typer.Option(help="Comma-separated models.")] = "smollm2,gemma3",
    episodes: Annotated[int, typer.Option(help="Test episodes per skill.")] = 2,
    steps: Annotated[int, typer.Option(help="Frames per test episode.")] = 200,
    work: Annotated[Path, typer.Option(help="Scratch directory (records, logs, results.json).")] =
        Path("docs/bench-raw/llm"),
    report_only: Annotated[bool, typer.Option(help="Rebuild the section from the saved results; run "
                                                   "nothing.")] = False,
    skill_format: Annotated[str, typer.Option(help="How the fast agent writes skills, as RLGPT_SKILL_FORMAT: "
                                                   "auto (a program for these embedded models), python, program."
                                              )] = "auto",
    candidates: Annotated[int, typer.Option(help="Skills drawn per sub-task; the best by its test is kept.")] = 1,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    results_path = work / "results.json"
    if report_only:
        results = load_results(results_path)
    else:
        work.mkdir(parents=True, exist_ok=True)
        repeats = critic_repeats()
        results = {"date_utc": utc_now(), "machine": machine_description(), "episodes": episodes, "steps": steps,
                   "start_inventory": "chain",
                   "dead_loop_repeats": repeats, "subtasks": [s[0] for s in SUBTASKS]}
        started = time.perf_counter()
        env = start_service("env", work / "logs")
        try:
            results["models"] = [measure_model(m.strip(), env.target, work, episodes, steps, repeats,
                                               skill_format, candidates) for m in models.split(",")]
        finally:
            env.stop()
        results["total_seconds"] = time.perf_counter() - started
        save_results(results_path, results)
    section = render(results)
    write_section(output, TITLE, section)
    console.print(section)


if __name__ == "__main__":
    typer.run(main)
