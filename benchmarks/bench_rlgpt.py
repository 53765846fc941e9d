"""`make bench-rlgpt`: pure RL vs pure code vs RL-GPT on Crafter tasks of different depth, same frame budget, and
RL-GPT's agent ablation (one agent, slow + fast, slow + fast + critic, as in the paper).

Each run has services of its own (env, learner, critic, planner, and the embedded LLM unless one is configured),
started with an empty skill library of its own, so every mode starts from the same library state. Each run's
numbers come from the planner's gRPC API only (its ``WatchRun`` events, see ``benchmarks/rlgpt/events.py``): the
final whole-task success rate over E episodes, LLM tokens, training frames and the training frames to the first
success, and the whole task's success after every outer iteration (the paper's success per iteration). ``rl-gpt``
runs once per agent setup (``--agents``, the planner's ``StartRunRequest.agents``); the other modes run once. The
results are saved in ``docs/results/bench-rlgpt.json``, each run with its own date, machine and LLM: a rerun of some
(task, mode, setup) replaces those runs and keeps the others (``benchmarks/rlgpt/results.py``; ``--fresh`` replaces
the file); ``--report-only`` rebuilds the section and its plots from them.

Each run's library is a fresh file under ``<work>/libraries/`` (``RLGPT_PLANNER_LIBRARY_PATH`` of its planner;
one set in this process is not used), and its raw result records that file and the skills the run found at its start
(``benchmarks/rlgpt/library.py``). Results saved before that shared one planner and its library, in table order.

Mode ``rl+reference-skills`` isolates RL-GPT's mechanism from the LLM's skill: the same training as pure RL, with
the hand-written skills of ``services/env_server/skills/reference.py`` (written by people, never shown to the LLM)
inserted into the action space as macro actions. It is what RL-GPT's RL side gets when the fast agent's code works.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from benchmarks.common import RAW_DIR, load_results, machine_description, save_results, utc_now, write_section
from benchmarks.rlgpt.events import run_numbers
from benchmarks.rlgpt.library import LIBRARY_ENV, run_library, started_with
from benchmarks.rlgpt.report import ABLATED_MODE, AGENT_SETUPS, FIGURE, REFERENCE_MODE, TITLE, render_section
from benchmarks.rlgpt.results import merged
from benchmarks.run.reading import final_of
from rlgpt import worlds
from rlgpt.app.runner import RunOptions, follow, local_services, task_spec
from rlgpt.config import LLMSettings
from rlgpt.grpc_client import create_channel
from rlgpt.llm.factory import needs_local_server
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, learner_pb2_grpc, planner_pb2, planner_pb2_grpc
from services.env_server.skills.reference import REFERENCE_SKILLS
from services.planner.context import AgentSetup
from services.planner.settings import PlannerSettings

EPISODE_FRAMES = 1000  # the loops' whole-task episode length (FINAL_EPISODE_FRAMES)
DEFAULT_TASKS = "make_wood_pickaxe,collect_stone"
DEFAULT_MODES = f"pure-rl,pure-code,{ABLATED_MODE},{REFERENCE_MODE}"
DEFAULT_AGENTS = ",".join(AGENT_SETUPS)
# The default budget keeps the default 12 runs within about an hour on 2 cores with the embedded model (an
# estimate): the last bench before the ablation ran 8 runs (2 of them rl-gpt, about 4.5 min each) at 30,000 frames
# in 37 min; the ablation adds 4 rl-gpt runs and every planner run now evaluates the whole task after each outer
# iteration (~63 min at 30,000). Training (~260 frames/s through the env server, 10 runs train) is the part that
# scales with the budget: 20,000 frames saves roughly 6 min, about 55-60 min in all. Each run now starts its own
# services (the embedded model loaded once per run), which the estimate leaves out.
RESULTS = Path("docs/results/bench-rlgpt.json")
"""The raw results, per run and per world of its final evaluation (tracked, unlike the runs under ``--work``)."""
DEFAULT_FRAMES = 20000
UNSET_AGENTS = ""  # pure RL and the reference-skills mode have no agents
console = Console(stderr=True)
log = logging.getLogger(__name__)


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
                                                              seed=worlds.final_worlds(seed), task=spec), timeout=3600)
    return numbers | {"success_rate": evaluation.success_rate, "ended": True}


def planned_runs(tasks: list[str], modes: list[str], agents: list[str]) -> list[tuple[str, str, str]]:
    """(task, mode, agent setup) of every run, in order: ``rl-gpt`` once per setup, the other modes once
    (``pure-code`` with the planner's default setup, the modes without an LLM with none)."""
    def setups(mode: str) -> list[str]:
        if mode == ABLATED_MODE:
            return agents
        return [AgentSetup.SLOW_FAST_CRITIC.value] if mode == "pure-code" else [UNSET_AGENTS]
    return [(task, mode, setup) for task in tasks for mode in modes for setup in setups(mode)]


def default_run_count() -> int:
    return len(planned_runs(DEFAULT_TASKS.split(","), DEFAULT_MODES.split(","), DEFAULT_AGENTS.split(",")))


def planner_run(planner_target: str, task: str, mode: str, setup: str, options: RunOptions,
                name: str) -> tuple[dict[str, Any], Path]:
    """One run of the planner, followed to its end: its numbers (from its events) and its run directory."""
    stub = planner_pb2_grpc.PlannerServiceStub(create_channel(planner_target, default_timeout=120,
                                                              wait_ready_seconds=60))
    frames = options.total_frames
    run = stub.StartRun(planner_pb2.StartRunRequest(
        task=task_spec(task, ""), mode=mode, agents=setup, seed=options.seed, budgets=planner_pb2.Budgets(
            max_outer_iterations=options.outer, max_inner_iterations=options.inner,
            env_frames_per_training=frames if mode == "pure-rl" else frames // 2,
            total_env_frames=frames, eval_episodes=options.eval_episodes)))
    console.print(f"{name}: run {run.run_id}")
    follow(stub, run.run_id, console)
    # The run has ended: WatchRun from seq 0 replays all its events and then ends.
    numbers = run_numbers(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=600))
    # Per world, so anyone can recompute the rates and pair the modes world by world.
    return numbers | {"run_id": run.run_id, "final": final_of(Path(run.run_dir))}, Path(run.run_dir)


def run_one(services: dict[str, Any], task: str, mode: str, setup: str, options: RunOptions,
            name: str) -> tuple[dict[str, Any], Path | None]:
    """One run on its services: its numbers, and its planner run directory (None for the mode without one)."""
    if mode != REFERENCE_MODE:
        return planner_run(services["planner"].target, task, mode, setup, options, name)
    console.print(f"{name}: training with the reference skills")
    return run_with_reference_skills(services["env"].target, services["learner"].target, task, options.total_frames,
                                     options.eval_episodes, options.seed), None


def run_modes(tasks: list[str], modes: list[str], agents: list[str], frames: int, eval_episodes: int,
              work: Path, llm_name: str = "") -> dict[str, Any]:
    """Every (task, mode, agent setup) run, each on local services of its own started with an empty skill library
    of its own (:func:`benchmarks.rlgpt.library.run_library`), so every mode starts from the same library state;
    the numbers of each from the services' APIs. ``llm_name``: how the section names the LLM (default: from the
    LLM settings)."""
    llm = LLMSettings.load()
    llm_name = llm_name or (f"embedded {llm.local_model} (llama.cpp server)" if needs_local_server(llm)
                            else f"{llm.model or 'gpt-4o-mini'} at {llm.base_url or 'api.openai.com'}")
    skill_format = PlannerSettings.load().skill_format
    if os.environ.get(LIBRARY_ENV):
        log.warning("%s is not used by the bench: each run starts from an empty library of its own", LIBRARY_ENV)
    base = RunOptions(task="", success="", mode="rl-gpt", agents="slow-fast-critic", resume=None, runs_dir=work,
                      outer=2, inner=2, frames_per_training=frames // 2, total_frames=frames,
                      eval_episodes=eval_episodes, candidates=1, seed=0)
    results: dict[str, Any] = {
        "settings": {"frames": frames, "eval_episodes": eval_episodes, "outer": base.outer, "inner": base.inner,
                     "agents": agents, "default_frames": DEFAULT_FRAMES, "default_runs": default_run_count()},
        "reference_skills": list(REFERENCE_SKILLS), "runs": []}
    started = time.time()
    plan = planned_runs(tasks, modes, agents)
    for index, (task, mode, setup) in enumerate(plan, 1):
        library = run_library(work, index, task, mode, setup)
        with local_services(base, work / "logs" / library.stem, {LIBRARY_ENV: str(library)}) as services:
            t0, measured = time.time(), {"date_utc": utc_now(), "machine": machine_description(), "llm": llm_name,
                                         "skill_format": skill_format}
            name = f"[{index}/{len(plan)}] {task} / {mode}" + (f" / {setup}" if setup else "")
            numbers, run_dir = run_one(services, task, mode, setup, base, name)
            seconds = time.time() - t0  # the run, not its services' start and stop
        results["runs"].append({"task": task, "mode": mode, "agents": setup, "seconds": seconds,
                                **measured, **numbers, "library": started_with(work, library, run_dir)})
        save_results(work / "results.partial.json", results)  # what ran so far, should the bench stop
    results["total_seconds"] = time.time() - started
    return results


def main(
    output: Annotated[Path, typer.Option(help="Markdown file to update.")] = Path("docs/BENCHMARKS.md"),
    tasks: Annotated[str, typer.Option(help="Comma-separated Crafter achievements.")] = DEFAULT_TASKS,
    modes: Annotated[str, typer.Option(help="Comma-separated modes (rl-gpt, pure-rl, pure-code, and "
                                              f"{REFERENCE_MODE}).")] = DEFAULT_MODES,
    agents: Annotated[str, typer.Option(help="Comma-separated agent setups (one, slow-fast, slow-fast-critic: the "
                                               "planner's StartRunRequest.agents); each rl-gpt run is made once per "
                                               "setup, the other modes once.")] = DEFAULT_AGENTS,
    frames: Annotated[int, typer.Option(help="Env-frame budget of every run.")] = DEFAULT_FRAMES,
    eval_episodes: Annotated[int, typer.Option(help="Final evaluation episodes.")] = 8,
    work: Annotated[Path, typer.Option(help="Runs directory (the raw results go here too).")] = RAW_DIR / "rlgpt",
    results: Annotated[Path, typer.Option(help="The raw results (tracked: every number of the section is computed "
                                               "from them).")] = RESULTS,
    report_only: Annotated[bool, typer.Option(help="Rebuild the section from the saved results; run "
                                                   "nothing.")] = False,
    title: Annotated[str, typer.Option(help="Heading of the section to write (another heading keeps the default "
                                            "section, e.g. for a second LLM).")] = TITLE,
    llm_name: Annotated[str, typer.Option(help="How the section names the LLM (default: from the LLM "
                                               "settings).")] = "",
    fresh: Annotated[bool, typer.Option(help="Replace the results file with these runs (by default each run "
                                             "replaces the saved run of its task, mode and agent setup, the others "
                                             "stay, each with its own date).")] = False,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    setups = [a.strip() for a in agents.split(",") if a.strip()]
    unknown = [a for a in setups if a not in {s.value for s in AgentSetup}]
    if unknown or not setups:
        raise typer.BadParameter(f"unknown agent setups {unknown or agents!r}; known: "
                                 f"{', '.join(s.value for s in AgentSetup)}", param_hint="--agents")
    work = work.resolve()
    if report_only:
        raw = load_results(results)
    else:
        work.mkdir(parents=True, exist_ok=True)
        raw = run_modes(tasks.split(","), modes.split(","), setups, frames, eval_episodes, work, llm_name)
        raw = merged(None if fresh or not results.exists() else load_results(results), raw)
        save_results(results, raw)
        (work / "results.partial.json").unlink(missing_ok=True)
    figure = output.parent / "figures" / (FIGURE if title == TITLE else f"{work.name}_{FIGURE}")
    section = render_section(raw, figure, title=title)
    write_section(output, title, section)
    console.print(section)


if __name__ == "__main__":
    typer.run(main)
