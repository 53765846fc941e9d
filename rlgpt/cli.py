"""The ``rlgpt`` command: the one place that composes services (serve, run, bench)."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from rlgpt.errors import ConfigError

app = typer.Typer(help="RL-GPT: LLM agents that write code-as-policy skills and drive RL.", no_args_is_help=True)
serve_app = typer.Typer(help="Run one service until SIGTERM/SIGINT.", no_args_is_help=True)
app.add_typer(serve_app, name="serve")
log = logging.getLogger("rlgpt")


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _load(*requests: tuple[type, dict[str, Any]]) -> list[Any]:
    """Loads settings; on any problem prints all of them (from every class) and exits with 2."""
    from rlgpt.config import load_together

    try:
        return load_together(*requests)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None


@serve_app.command("env")
def serve_env(
    port: Annotated[int | None, typer.Option(help="gRPC port; 0 picks a free one.")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="Prometheus port; 0 picks one, -1 disables.")] = None,
    host: Annotated[str | None, typer.Option(help="Interface to bind.")] = None,
    max_sessions: Annotated[int | None, typer.Option(help="Max open sessions.")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Start the env server (Crafter by default, MineDojo when installed)."""
    setup_logging(log_level)
    from rlgpt import metrics
    from rlgpt.config import EnvServerSettings, ServerSettings
    from rlgpt.grpc_server import ServiceBinding, create_server, serve_until_signal
    from rlgpt.v1 import env_pb2_grpc
    from services.env_server.servicer import SERVICE_NAME, EnvServicer

    server_settings, env_settings = _load(
        (ServerSettings, {"port": port, "metrics_port": metrics_port, "host": host}),
        (EnvServerSettings, {"max_sessions": max_sessions}))
    servicer = EnvServicer(env_settings)
    server, bound = create_server(
        f"{server_settings.host}:{server_settings.port}",
        [ServiceBinding(SERVICE_NAME, env_pb2_grpc.add_EnvServiceServicer_to_server, servicer)],
        max_workers=server_settings.max_workers, max_message_mb=server_settings.max_message_mb,
        metrics_label="env")
    metrics_bound = metrics.start_metrics_server(server_settings.metrics_port, server_settings.host)
    log.info("env server ready: grpc port %d, metrics port %s", bound, metrics_bound)
    # One machine-readable line for scripts that start the server with port 0.
    print(f"RLGPT_READY service=env port={bound} metrics_port={metrics_bound or -1}", flush=True)
    serve_until_signal(server, server_settings.grace_seconds)


@serve_app.command("learner")
def serve_learner(
    port: Annotated[int | None, typer.Option(help="gRPC port; 0 picks a free one.")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="Prometheus port; 0 picks one, -1 disables.")] = None,
    host: Annotated[str | None, typer.Option(help="Interface to bind.")] = None,
    env_server: Annotated[str | None, typer.Option(help="Env server address host:port.")] = None,
    run_dir: Annotated[str | None, typer.Option(help="Directory of jobs, logs and checkpoints.")] = None,
    runner: Annotated[str | None, typer.Option(help="Default job runner: local or kubernetes.")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Start the learner (Sample Factory APPO training jobs over the env server)."""
    setup_logging(log_level)
    from rlgpt.config import LearnerSettings, ServerSettings
    from rlgpt.v1 import learner_pb2_grpc
    from services.learner.servicer import SERVICE_NAME, LearnerServicer

    server_settings, learner_settings = _load(
        (ServerSettings, {"port": port, "metrics_port": metrics_port, "host": host}),
        (LearnerSettings, {"env_server": env_server, "run_dir": run_dir, "runner": runner}))
    runners = None
    if learner_settings.runner == "kubernetes":
        from services.learner.jobs import LocalRunner
        from services.learner.k8s import KubernetesRunner

        runners = {"local": LocalRunner(), "kubernetes": KubernetesRunner(learner_settings)}
    servicer = LearnerServicer(learner_settings, runners)
    _serve("learner", server_settings, SERVICE_NAME, learner_pb2_grpc.add_LearnerServiceServicer_to_server, servicer)


@serve_app.command("planner")
def serve_planner(
    port: Annotated[int | None, typer.Option(help="gRPC port; 0 picks a free one.")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="Prometheus port; 0 picks one, -1 disables.")] = None,
    host: Annotated[str | None, typer.Option(help="Interface to bind.")] = None,
    env_server: Annotated[str | None, typer.Option(help="Env server address host:port.")] = None,
    learner: Annotated[str | None, typer.Option(help="Learner address host:port.")] = None,
    run_dir: Annotated[str | None, typer.Option(help="Directory of runs.")] = None,
    llm_base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL (empty: OpenAI or embedded).")]
    = None,
    llm_model: Annotated[str | None, typer.Option(help="Model name.")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Start the planner (slow and fast agents). With no LLM key or URL it embeds a local llama.cpp server."""
    setup_logging(log_level)
    from rlgpt.config import LLMSettings, PlannerSettings, ServerSettings
    from rlgpt.llm.factory import make_client
    from rlgpt.v1 import planner_pb2_grpc
    from services.planner.servicer import SERVICE_NAME, PlannerServicer

    server_settings, planner_settings, llm_settings = _load(
        (ServerSettings, {"port": port, "metrics_port": metrics_port, "host": host}),
        (PlannerSettings, {"env_server": env_server, "learner": learner, "run_dir": run_dir}),
        (LLMSettings, {"base_url": llm_base_url, "model": llm_model}))
    llm, local_server = make_client(llm_settings, record_dir=Path(planner_settings.run_dir) / "llm-calls",
                                    log_dir=Path(planner_settings.run_dir))
    try:
        servicer = PlannerServicer(planner_settings, llm)
        _serve("planner", server_settings, SERVICE_NAME, planner_pb2_grpc.add_PlannerServiceServicer_to_server,
               servicer)
    finally:
        if local_server is not None:
            local_server.stop()


@serve_app.command("critic")
def serve_critic(
    port: Annotated[int | None, typer.Option(help="gRPC port; 0 picks a free one.")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="Prometheus port; 0 picks one, -1 disables.")] = None,
    host: Annotated[str | None, typer.Option(help="Interface to bind.")] = None,
    no_llm: Annotated[bool, typer.Option("--no-llm", help="Deterministic verdicts only; no LLM is started.")]
    = False,
    llm_base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL (empty: OpenAI or embedded).")]
    = None,
    llm_model: Annotated[str | None, typer.Option(help="Model name.")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Start the critic (verdicts on sub-task attempts). With no LLM key or URL it embeds a local llama.cpp server."""
    setup_logging(log_level)
    from rlgpt.config import CriticSettings, LLMSettings, ServerSettings
    from rlgpt.v1 import critic_pb2_grpc
    from services.critic.servicer import SERVICE_NAME, CriticServicer

    server_settings, critic_settings, llm_settings = _load(
        (ServerSettings, {"port": port, "metrics_port": metrics_port, "host": host}),
        (CriticSettings, {"use_llm": False if no_llm else None}),
        (LLMSettings, {"base_url": llm_base_url, "model": llm_model}))
    llm, local_server = None, None
    if critic_settings.use_llm:
        from rlgpt.llm.factory import make_client

        llm, local_server = make_client(llm_settings)
    try:
        servicer = CriticServicer(critic_settings, llm)
        _serve("critic", server_settings, SERVICE_NAME, critic_pb2_grpc.add_CriticServiceServicer_to_server,
               servicer)
    finally:
        if local_server is not None:
            local_server.stop()


def _serve(name: str, server_settings: Any, service_name: str, add_fn: Any, servicer: Any) -> None:
    """Starts one service, prints the ready line scripts wait for, and serves until SIGTERM/SIGINT."""
    from rlgpt import metrics
    from rlgpt.grpc_server import ServiceBinding, create_server, serve_until_signal

    server, bound = create_server(
        f"{server_settings.host}:{server_settings.port}", [ServiceBinding(service_name, add_fn, servicer)],
        max_workers=server_settings.max_workers, max_message_mb=server_settings.max_message_mb, metrics_label=name)
    metrics_bound = metrics.start_metrics_server(server_settings.metrics_port, server_settings.host)
    log.info("%s ready: grpc port %d, metrics port %s", name, bound, metrics_bound)
    # One machine-readable line for scripts that start the server with port 0.
    print(f"RLGPT_READY service={name} port={bound} metrics_port={metrics_bound or -1}", flush=True)
    serve_until_signal(server, server_settings.grace_seconds)


@app.command("run")
def run(
    task: Annotated[str, typer.Option(help="Crafter achievement the reference skills are tested on.")] = "collect_wood",
    episodes: Annotated[int, typer.Option(help="Test episodes per skill.", min=1, max=64)] = 8,
    max_steps: Annotated[int, typer.Option(help="Frames per test episode.", min=1)] = 300,
    runs_dir: Annotated[Path, typer.Option(help="Where run directories are created.")] = Path("runs"),
    seed: Annotated[int, typer.Option(help="Seed of the first test world.")] = 0,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "WARNING",
) -> None:
    """Run the main job on the embedded defaults: Crafter env server on loopback, skills tested, a report.

    Until the planner, learner and critic services land, the job exercises the env server end to
    end with the hand-written reference skills; the run directory gets report.md and a plot.
    """
    setup_logging(log_level)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rlgpt.grpc_client import create_channel
    from rlgpt.launcher import running_services
    from rlgpt.report import SkillTestResult, write_skill_report
    from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc
    from services.env_server.skills.reference import REFERENCE_SKILLS

    console = Console(stderr=True)
    run_dir = runs_dir / f"crafter__{task}__{seed}__{time.strftime('%Y%m%d-%H%M%S')}"
    results: list[SkillTestResult] = []
    with running_services(["env"], run_dir / "logs") as services:
        env = services["env"]
        console.print(f"env server on {env.target} (metrics port {env.metrics_port}); run dir {run_dir}")
        channel = create_channel(env.target, default_timeout=120, wait_ready_seconds=30)
        stub = env_pb2_grpc.EnvServiceStub(channel)
        for name, code in REFERENCE_SKILLS.items():
            stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True,
                                                            description="hand-written reference skill"))
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("success {task.fields[rate]:.2f}"), TimeElapsedColumn())
        with Progress(*columns, console=console) as progress:
            for name in REFERENCE_SKILLS:
                bar = progress.add_task(f"skill {name}", total=episodes, rate=0.0)
                result = SkillTestResult(name, task, [], [], [], "")
                for episode in range(episodes):
                    reply = stub.RunSkill(env_pb2.RunSkillRequest(
                        skill=name, episodes=1, max_steps=max_steps, seed=seed + episode,
                        task=common_pb2.TaskSpec(name=task)))
                    summary = reply.episodes[0]
                    result.successes.append(summary.success)
                    result.steps.append(summary.steps)
                    result.errors.append(summary.error.type if summary.HasField("error") else "")
                    result.sample_trajectory = result.sample_trajectory or summary.text
                    progress.update(bar, advance=1, rate=sum(result.successes) / len(result.successes))
                results.append(result)
        channel.close()
    report = write_skill_report(run_dir, f"rlgpt run: {task} on Crafter", results, [
        f"Env server: real gRPC on loopback; {episodes} test episodes per skill, {max_steps} frames each, "
        f"seeds {seed}..{seed + episodes - 1}.",
        "Skills: the hand-written reference skills (the planner, learner and critic services are not part "
        "of this run yet)."])
    console.print(f"report: {report}")
    print(report)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
