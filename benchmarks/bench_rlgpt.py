"""`make bench-rlgpt`: pure RL vs pure code vs RL-GPT on Crafter tasks of different depth, same frame budget.

One set of services (env, learner, critic, planner, and the embedded LLM unless one is configured)
serves every run. Per run: the final whole-task success rate over E episodes and the frames to the
first success (pure RL: the first training progress record with success > 0; coded and mixed runs:
the frames the run had spent when its final evaluation first succeeded, an upper bound).

Mode ``rl+reference-skills`` isolates RL-GPT's mechanism from the LLM's skill: the same training as pure RL, with
the hand-written skills of ``services/env_server/skills/reference.py`` (written by people, never shown to the LLM)
inserted into the action space as macro actions. It is what RL-GPT's RL side gets when the fast agent's code works.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Annotated, Any

import matplotlib
import typer
from rich.console import Console

from benchmarks.common import machine_description, write_section
from rlgpt.config import LLMSettings
from rlgpt.grpc_client import create_channel
from rlgpt.llm.factory import needs_local_server
from rlgpt.runner import RunOptions, follow, local_services, task_spec
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, learner_pb2_grpc, planner_pb2, planner_pb2_grpc
from services.env_server.skills.reference import REFERENCE_SKILLS

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TITLE = "## RL-GPT vs pure RL vs pure code (make bench-rlgpt)"
REFERENCE_MODE = "rl+reference-skills"
EPISODE_FRAMES = 1000  # the loops' whole-task episode length (FINAL_EPISODE_FRAMES)
console = Console(stderr=True)


def frames_to_first_success(state: dict[str, Any], mode: str) -> int | None:
    final = state.get("final") or {}
    if mode == "pure-rl":
        for sub in state.get("subtasks", {}).values():
            for point in sub.get("curve", []):
                if point["success_rate"] > 0:
                    return int(point["env_frames"])
        return None
    return int(state.get("frames_used", 0)) if final.get("success_rate", 0) > 0 else None


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
    if last is None or last.state != learner_pb2.JOB_STATE_SUCCEEDED:
        return {"success_rate": 0.0, "frames_used": last.env_frames if last else 0, "frames_to_first_success": None,
                "controller": "", "error": f"job {job_id}: {last.message if last else 'no progress'}"}
    evaluation = learner.Evaluate(learner_pb2.EvaluateRequest(job_id=job_id, episodes=eval_episodes,
                                                              seed=seed + 1000, task=spec), timeout=3600)
    return {"success_rate": evaluation.success_rate, "frames_used": int(last.env_frames),
            "frames_to_first_success": first_success, "error": "",
            "controller": f"policy with {len(REFERENCE_SKILLS)} reference skills (job {job_id})"}


def main(
    output: Annotated[Path, typer.Option(help="Markdown file to update.")] = Path("docs/BENCHMARKS.md"),
    tasks: Annotated[str, typer.Option(help="Comma-separated Crafter achievements.")] =
        "make_wood_pickaxe,collect_stone",
    modes: Annotated[str, typer.Option(help="Comma-separated modes (rl-gpt, pure-rl, pure-code, and "
                                              f"{REFERENCE_MODE}).")] = f"pure-rl,pure-code,rl-gpt,{REFERENCE_MODE}",
    frames: Annotated[int, typer.Option(help="Env-frame budget of every run.")] = 30000,
    eval_episodes: Annotated[int, typer.Option(help="Final evaluation episodes.")] = 8,
    work: Annotated[Path, typer.Option(help="Runs directory.")] = Path("docs/bench-raw/rlgpt"),
) -> None:
    logging.basicConfig(level=logging.WARNING)
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    llm = LLMSettings.load()
    llm_used = (f"embedded {llm.local_model} (llama.cpp server)" if needs_local_server(llm)
                else f"{llm.model or 'gpt-4o-mini'} at {llm.base_url or 'api.openai.com'}")
    base = RunOptions(task="", success="", mode="rl-gpt", agents="slow-fast-critic", resume=None, runs_dir=work,
                      outer=2, inner=2, frames_per_training=frames // 2, total_frames=frames,
                      eval_episodes=eval_episodes, candidates=1, seed=0)
    results: list[dict[str, Any]] = []
    started = time.time()
    with local_services(base, work / "logs") as services:
        stub = planner_pb2_grpc.PlannerServiceStub(
            create_channel(services["planner"].target, default_timeout=120, wait_ready_seconds=60))
        for task in tasks.split(","):
            for mode in modes.split(","):
                t0 = time.time()
                if mode == REFERENCE_MODE:
                    console.print(f"{task} / {mode}: training with the reference skills")
                    result = run_with_reference_skills(services["env"].target, services["learner"].target, task,
                                                       frames, eval_episodes, base.seed)
                    results.append({"task": task, "mode": mode, "run_dir": "", "seconds": time.time() - t0,
                                    "tokens": 0, **result})
                    continue
                request = planner_pb2.StartRunRequest(
                    task=task_spec(task, ""), mode=mode, seed=0, budgets=planner_pb2.Budgets(
                        max_outer_iterations=base.outer, max_inner_iterations=base.inner,
                        env_frames_per_training=frames if mode == "pure-rl" else frames // 2,
                        total_env_frames=frames, eval_episodes=eval_episodes))
                run = stub.StartRun(request)
                console.print(f"{task} / {mode}: run {run.run_id}")
                last = follow(stub, run.run_id, console)
                state_path = Path(run.run_dir) / "state.json"
                state = json.loads(state_path.read_text()) if state_path.exists() else {}
                final = state.get("final") or {}
                results.append({
                    "task": task, "mode": mode, "run_dir": run.run_dir, "seconds": time.time() - t0,
                    "success_rate": final.get("success_rate", 0.0), "controller": final.get("controller", ""),
                    "frames_used": state.get("frames_used", 0),
                    "frames_to_first_success": frames_to_first_success(state, mode),
                    "tokens": sum(i.get("tokens", 0) for i in state.get("iterations", [])),
                    "error": last.error.message if last is not None and last.WhichOneof("payload") == "error" else "",
                })
    (work / "results.json").write_text(json.dumps(results, indent=1))
    figure = output.parent / "figures" / "rlgpt_modes.png"
    figure.parent.mkdir(parents=True, exist_ok=True)
    task_names = list(dict.fromkeys(r["task"] for r in results))
    mode_names = list(dict.fromkeys(r["mode"] for r in results))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(mode_names))
    for j, mode in enumerate(mode_names):
        ax.bar([i + j * width for i in range(len(task_names))],
               [next(r["success_rate"] for r in results if r["task"] == t and r["mode"] == mode) for t in task_names],
               width, label=mode)
    ax.set_xticks([i + width * (len(mode_names) - 1) / 2 for i in range(len(task_names))], task_names)
    ax.set_ylabel("final success rate")
    ax.set_ylim(0, 1)
    ax.set_title(f"Same budget: {frames} env frames per run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(figure, dpi=100)
    plt.close(fig)
    lines = [TITLE, "", f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine_description()}; "
             f"LLM: {llm_used}; budget {frames} env frames per run (skill tests and training; the final "
             f"evaluation of {eval_episodes} whole-task episodes is not counted); O=2, I=2; "
             f"{(time.time() - started) / 60:.0f} min in all.", "",
             "| task | mode | final success | frames to first success | frames used | LLM tokens | controller |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in results:
        first = r["frames_to_first_success"]
        lines.append(f"| {r['task']} | {r['mode']} | {r['success_rate']:.0%} | {first if first is not None else '-'} "
                     f"| {r['frames_used']} | {r['tokens']} | {r['controller'] or r['error'][:60]} |")
    lines += ["", "Modes: `pure-rl` trains on the whole task with primitive actions only (no LLM); `pure-code` has the "
              "fast agent write a skill per sub-task and runs their chain; `rl-gpt` is the two loops (slow agent "
              "decides code or RL, coded skills join the RL action space); "
              f"`{REFERENCE_MODE}` is pure RL's training with the hand-written reference skills "
              f"({', '.join(REFERENCE_SKILLS)}) as macro actions: RL-GPT's mechanism with code that works, "
              "independent of the LLM.", "", f"![success by mode](figures/{figure.name})", ""]
    write_section(output, TITLE, "\n".join(lines))
    console.print("\n".join(lines))


if __name__ == "__main__":
    typer.run(main)
