"""`make bench-rlgpt`: pure RL vs pure code vs RL-GPT on Crafter tasks of different depth, same frame budget.

One set of services (env, learner, critic, planner, and the embedded LLM unless one is configured)
serves every run. Each run's numbers come from the planner's gRPC API only (its ``WatchRun`` events, see
``benchmarks/rlgpt/events.py``): the final whole-task success rate over E episodes, LLM tokens, training
frames and the training frames to the first success. The results are saved in
``docs/bench-raw/rlgpt/results.json``; ``--report-only`` rebuilds the section and its plot from them.

Mode ``rl+reference-skills`` isolates RL-GPT's mechanism from the LLM's skill: the same training as pure RL, with
the hand-written skills of ``services/env_server/skills/reference.py`` (written by people, never shown to the LLM)
inserted into the action space as macro actions. It is what RL-GPT's RL side gets when the fast agent's code works.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from benchmarks.common import RAW_DIR, load_results, machine_description, save_results, utc_now, write_section
from benchmarks.rlgpt.events import run_numbers
from benchmarks.rlgpt.report import FIGURE, REFERENCE_MODE, TITLE, render_section
from rlgpt.config import LLMSettings
from rlgpt.grpc_client import create_channel
from rlgpt.llm.factory import needs_local_server
from rlgpt.runner import RunOptions, follow, local_services, task_spec
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, learner_pb2_grpc, planner_pb2, planner_pb2_grpc
from services.env_server.skills.reference import REFERENCE_SKILLS

EPISODE_FRAMES = 1000  # the loops' whole-task episode length (FINAL_EPISODE_FRAMES)
console = Console(stderr=True)


def run_with_reference_skills(env_target: str, learner_target: str, task: str, frames: int, eval_episodes: int,
                              seed: int) -> dict[str, Any]:
    """Pure RL's training with the reference skills as macro actions; the whole task evaluated afterwards."""
    env = env_pb2_grpc.EnvServiceStub(create_channel(env_target, default_timeout=120, wait_ready_seconds=60))
    learner = learner_pb2_grpc.LearnerServiceStub(create_channel(learner_target, default_timeout=120,
                                                                 wait_ready_seconds=60))
    for name, code in REFERENCE_SKILLS.items():
        env.RegisterSkill(env_pb2.RegisterSkillRequest(name=f"ref_{name}", code=code, replace=True,
                                                       description="reference skill (hand-written)"))
    spec = common_pb2.TaskSpec(name=task, description=task, success=[common_pb2.Condition(achievement=task)])
    config = learner_pb2.RLConfig(
        name=f"{task}_reference_skills", task=spec, env_frames=frames, episode_length=EPISODE_FRAMES, seed=seed,
        skills=[f"ref_{name}" for name in REFERENCE_SKILLS], num_workers=2,
        reward_terms=[common_pb2.RewardTerm(kind="success", weight=10.0),
                      common_pb2.RewardTerm(kind="achievement", target="*", weight=1.0)])
    job_id = learner.StartTraining(learner_pb2.StartTrainingRequest(config=config)).job_id
    first_success, last = None, None
    for progress in learner.WatchJob(learner_pb2.WatchJobRequest(job_id=job_id), timeout=6 * 3600):
        if first_success is None and progress.success_rate > 0:
            first_success = int(progress.env_frames)
        last = progress
    numbers: dict[str, Any] = {"success_rate": 0.0, "ended": False, "tokens": 0, "plan": "", "error": "",
                               "training_frames": int(last.env_frames) if last else 0,
                               "frames_to_first_training_success": first_success}
    if last is None or last.state != learner_pb2.JOB_STATE_SUCCEEDED:
        return numbers | {"error": f"job {job_id}: {last.message if last else 'no progress'}"}
    evaluation = learner.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=eval_episodes,
                                                              seed=seed + 1000, task=spec), timeout=3600)
    return numbers | {"success_rate": evaluation.success_rate, "ended": True}


def run_modes(tasks: list[str], modes: list[str], frames: int, eval_episodes: int, work: Path) -> dict[str, Any]:
    """Every (task, mode) run on one set of local services; the numbers of each from the services' APIs."""
    llm = LLMSettings.load()
    base = RunOptions(task="", success="", mode="rl-gpt", agents="slow-fast-critic", resume=None, runs_dir=work,
                      outer=2, inner=2, frames_per_training=frames // 2, total_frames=frames,
                      eval_episodes=eval_episodes, candidates=1, seed=0)
    results: dict[str, Any] = {
        "date_utc": utc_now(), "machine": machine_description(),
        "llm": (f"embedded {llm.local_model} (llama.cpp server)" if needs_local_server(llm)
                else f"{llm.model or 'gpt-4o-mini'} at {llm.base_url or 'api.openai.com'}"),
        "settings": {"frames": frames, "eval_episodes": eval_episodes, "outer": base.outer, "inner": base.inner},
        "reference_skills": list(REFERENCE_SKILLS), "runs": []}
    started = time.time()
    with local_services(base, work / "logs") as services:
        stub = planner_pb2_grpc.PlannerServiceStub(
            create_channel(services["planner"].target, default_timeout=120, wait_ready_seconds=60))
        for task in tasks:
            for mode in modes:
                t0 = time.time()
                if mode == REFERENCE_MODE:
                    console.print(f"{task} / {mode}: training with the reference skills")
                    numbers = run_with_reference_skills(services["env"].target, services["learner"].target, task,
                                                        frames, eval_episodes, base.seed)
                else:
                    run = stub.StartRun(planner_pb2.StartRunRequest(
                        task=task_spec(task, ""), mode=mode, seed=0, budgets=planner_pb2.Budgets(
                            max_outer_iterations=base.outer, max_inner_iterations=base.inner,
                            env_frames_per_training=frames if mode == "pure-rl" else frames // 2,
                            total_env_frames=frames, eval_episodes=eval_episodes)))
                    console.print(f"{task} / {mode}: run {run.run_id}")
                    follow(stub, run.run_id, console)
                    # The run has ended: WatchRun from seq 0 replays all its events and then ends.
                    numbers = run_numbers(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=600))
                results["runs"].append({"task": task, "mode": mode, "seconds": time.time() - t0, **numbers})
    results["total_seconds"] = time.time() - started
    return results


def main(
    output: Annotated[Path, typer.Option(help="Markdown file to update.")] = Path("docs/BENCHMARKS.md"),
    tasks: Annotated[str, typer.Option(help="Comma-separated Crafter achievements.")] =
        "make_wood_pickaxe,collect_stone",
    modes: Annotated[str, typer.Option(help="Comma-separated modes (rl-gpt, pure-rl, pure-code, and "
                                              f"{REFERENCE_MODE}).")] = f"pure-rl,pure-code,rl-gpt,{REFERENCE_MODE}",
    frames: Annotated[int, typer.Option(help="Env-frame budget of every run.")] = 30000,
    eval_episodes: Annotated[int, typer.Option(help="Final evaluation episodes.")] = 8,
    work: Annotated[Path, typer.Option(help="Runs directory (the raw results go here too).")] = RAW_DIR / "rlgpt",
    report_only: Annotated[bool, typer.Option(help="Rebuild the section from the saved results; run "
                                                   "nothing.")] = False,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    work = work.resolve()
    results_path = work / "results.json"
    if report_only:
        results = load_results(results_path)
    else:
        work.mkdir(parents=True, exist_ok=True)
        results = run_modes(tasks.split(","), modes.split(","), frames, eval_episodes, work)
        save_results(results_path, results)
    section = render_section(results, output.parent / "figures" / FIGURE)
    write_section(output, TITLE, section)
    console.print(section)


if __name__ == "__main__":
    typer.run(main)
