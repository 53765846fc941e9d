"""The ``rlgpt`` command: the one place that composes services (serve, run, bench)."""

from __future__ import annotations

import logging
import sys
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


def _load(cls: Any, overrides: dict[str, Any]) -> Any:
    try:
        return cls.load(overrides)
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

    server_settings = _load(ServerSettings, {"port": port, "metrics_port": metrics_port, "host": host})
    env_settings = _load(EnvServerSettings, {"max_sessions": max_sessions})
    servicer = EnvServicer(env_settings)
    server, bound = create_server(
        f"{server_settings.host}:{server_settings.port}",
        [ServiceBinding(SERVICE_NAME, env_pb2_grpc.add_EnvServiceServicer_to_server, servicer)],
        max_workers=server_settings.max_workers, max_message_mb=server_settings.max_message_mb,
        metrics_label="env")
    metrics_bound = metrics.start_metrics_server(server_settings.metrics_port, server_settings.host)
    log.info("env server ready: grpc port %d, metrics port %s", bound, metrics_bound)
    # One machine-readable line for scripts that start the server with port 0.
    print(f"RLGPT_READY service=env port={bound} metrics_port={metrics_bound or -1}", flush=True)  # noqa: T201
    serve_until_signal(server, server_settings.grace_seconds)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
