"""The ``rlgpt`` command: the one place that composes services (serve, run, report, health)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from rlgpt.app.cli_serve import LogLevel, serve_app, setup_logging
from rlgpt.errors import RlgptError

app = typer.Typer(help="RL-GPT: LLM agents that write code-as-policy skills and drive RL.", no_args_is_help=True)
app.add_typer(serve_app, name="serve")
log = logging.getLogger("rlgpt")


def _budget_help(what: str, field: str) -> str:
    """A budget option's help: unset, the planner decides (its default is read from PlannerSettings, the one
    place it is written; the planner checks the value too)."""
    from services.planner.settings import PlannerSettings

    default = PlannerSettings.__dataclass_fields__[field].default
    return (f"{what}. Unset: the planner's default ({default} unless RLGPT_PLANNER_{field.upper()} is set "
            "on the planner); the planner checks the range.")


@app.command("run")
def run(
    task: Annotated[str, typer.Option(help="A Crafter achievement (e.g. make_wood_pickaxe), crafter (the whole "
                                           "game, measured by Crafter's score), or free text with --success.")
                    ] = "make_wood_pickaxe",
    success: Annotated[str, typer.Option(help="Success condition for a free-text task: an achievement, or "
                                              "item:count.")] = "",
    mode: Annotated[str, typer.Option(help="rl-gpt | pure-rl | pure-code")] = "rl-gpt",
    agents: Annotated[str, typer.Option(help="slow-fast-critic | slow-fast | one")] = "slow-fast-critic",
    resume: Annotated[Path | None, typer.Option(help="Continue a run: its id, which the planner finds among its "
                                                     "own runs (with --planner the one way: a planner resumes no "
                                                     "run outside its runs directory), or a local run directory "
                                                     "when the services start here (they are given its folder as "
                                                     "their runs directory).")]
    = None,
    runs_dir: Annotated[Path, typer.Option(help="Where run directories are created (services started here) and "
                                                "where each run's report is saved, in RUNS_DIR/<run id>.")]
    = Path("runs"),
    outer: Annotated[int | None, typer.Option(help=_budget_help("Max outer iterations O", "max_outer_iterations"),
                                              show_default=False)] = None,
    inner: Annotated[int | None, typer.Option(help=_budget_help("Max inner iterations I per sub-task",
                                                                "max_inner_iterations"), show_default=False)] = None,
    frames_per_training: Annotated[int | None, typer.Option(help=_budget_help(
        "Env frames per RL training", "env_frames_per_training"), show_default=False)] = None,
    total_frames: Annotated[int | None, typer.Option(help=_budget_help(
        "Env frames the whole run may spend, 0: unbounded", "total_env_frames"), show_default=False)] = None,
    eval_episodes: Annotated[int | None, typer.Option(help=_budget_help(
        "Evaluation episodes E (per whole-task evaluation and trained policy)", "eval_episodes"),
        show_default=False)] = None,
    target: Annotated[float | None, typer.Option(help=_budget_help(
        "The whole task's success rate (0..1) at which the run is done (for the whole game, its score / 100)",
        "target_success"),
        show_default=False)] = None,
    candidates: Annotated[int | None, typer.Option(help=_budget_help("Skill candidates per fast-agent step",
                                                                     "candidates"), show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    planner: Annotated[str, typer.Option(help="Use this planner (host:port) instead of starting all services "
                                              "here (e.g. a cluster).")] = "",
    replay: Annotated[Path | None, typer.Option(help="Re-run a recorded run (its request.json and llm/): every LLM "
                                                     "call is answered from the record, skills and trainings run "
                                                     "live. The task and budget options are taken from the "
                                                     "record.")] = None,
    env_servers: Annotated[int, typer.Option(help="Env servers started here (0: one per core); trainings spread "
                                                  "their rollout workers' sessions over them.", min=0)] = 0,
    log_level: LogLevel = "WARNING",
) -> None:
    """Run RL-GPT on a task: all four services on loopback (or --planner ADDR), live progress, a report."""
    setup_logging(log_level)
    from rlgpt.app.runner import RunOptions, run_rlgpt

    options = RunOptions(task=task, success=success, mode=mode, agents=agents, resume=resume, runs_dir=runs_dir,
                         outer=outer, inner=inner, frames_per_training=frames_per_training,
                         total_frames=total_frames, eval_episodes=eval_episodes, target=target, candidates=candidates,
                         seed=seed,
                         planner=planner, replay=replay, env_servers=env_servers)
    try:
        report = run_rlgpt(options)
    except RlgptError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    print(report)


@app.command("health")
def health(
    target: Annotated[str, typer.Argument(help="The server, HOST:PORT.")],
    service: Annotated[str, typer.Option(help="Service name to check (e.g. rlgpt.v1.EnvService); empty: the "
                                              "server as a whole.")] = "",
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answer.", min=0.1)] = 3.0,
) -> None:
    """gRPC health check (grpc.health.v1): exits 0 when SERVING, 1 otherwise (container HEALTHCHECK, probes)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    # No HTTP proxy for a probe: it must reach the server it names, whatever the pod's environment says.
    with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            typer.echo(f"{target} {service or '(server)'}: {exc.code().name}: {exc.details()}", err=True)
            raise typer.Exit(1) from None
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(f"{target} {service or '(server)'}: {status}")
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        raise typer.Exit(1)


@app.command("report")
def report(run_dir: Annotated[Path, typer.Argument(help="A local run directory (with request.json and "
                                                        "state.json).")]) -> None:
    """Write report.md and its PNG plots again for a local run directory (the planner writes them when a run
    ends, and `rlgpt run` saves them locally)."""
    from google.protobuf import json_format

    from rlgpt.v1 import planner_pb2
    from services.planner.report import outcome, write_run_report

    ended = ""
    status_path = run_dir / "status.json"
    if status_path.is_file():
        try:
            status = json_format.Parse(status_path.read_text(), planner_pb2.RunStatus())
            ended = outcome(status.state, status.error)
        except (json_format.ParseError, ValueError):
            log.warning("%s cannot be read; the report says nothing of how the run ended", status_path)
    try:
        path = write_run_report(run_dir, ended=ended)
    except RlgptError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    print(path)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
