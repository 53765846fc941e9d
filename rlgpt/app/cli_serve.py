"""``rlgpt serve``: one command per service (the options every gRPC service takes declared once), and the
logging and settings loading the CLI's commands share."""

from __future__ import annotations

import contextlib
import inspect
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from rlgpt.config import LLMSettings, ServerSettings, load_together
from rlgpt.errors import ConfigError

serve_app = typer.Typer(help="Run one service until SIGTERM/SIGINT.", no_args_is_help=True)
log = logging.getLogger("rlgpt")


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _load(*requests: tuple[type, dict[str, Any]]) -> list[Any]:
    """Loads settings; on any problem prints all of them (from every class) and exits with 2."""
    try:
        return load_together(*requests)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None


LogLevel = Annotated[str, typer.Option(help="Logging level.")]
LLMBaseURL = Annotated[str | None, typer.Option(help="OpenAI-compatible base URL (empty: OpenAI or embedded).")]
LLMModel = Annotated[str | None, typer.Option(help="Model name.")]
EnvServerAddress = Annotated[str | None, typer.Option(help="Env server address host:port.")]
# The options every gRPC service's `serve` command takes: overrides of ServerSettings.
_SERVER_OPTIONS = {
    "port": Annotated[int | None, typer.Option(help="gRPC port; 0 picks a free one.")],
    "metrics_port": Annotated[int | None, typer.Option(help="Prometheus port; 0 picks one, -1 disables.")],
    "host": Annotated[str | None, typer.Option(help="Interface to bind.")],
}


def _serve_command(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Registers ``rlgpt serve NAME`` for ``fn(server, **own_options)``: the command takes --port, --metrics-port
    and --host (ServerSettings overrides, handed to ``fn`` as the dict ``server``), then ``fn``'s own options,
    then --log-level, which is set up before ``fn`` runs."""
    def register(fn: Callable[..., None]) -> Callable[..., None]:
        keyword = inspect.Parameter.KEYWORD_ONLY
        own = list(inspect.signature(fn, eval_str=True).parameters.values())[1:]

        def command(**options: Any) -> None:
            setup_logging(options.pop("log_level"))
            fn({key: options.pop(key) for key in _SERVER_OPTIONS}, **options)

        command.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
            *(inspect.Parameter(key, keyword, default=None, annotation=hint) for key, hint in _SERVER_OPTIONS.items()),
            *(p.replace(kind=keyword) for p in own),
            inspect.Parameter("log_level", keyword, default="INFO", annotation=LogLevel)])
        command.__name__, command.__doc__ = fn.__name__, fn.__doc__
        serve_app.command(name)(command)
        return fn
    return register


@_serve_command("env")
def serve_env(server: dict[str, Any],
              max_sessions: Annotated[int | None, typer.Option(help="Max open sessions.")] = None) -> None:
    """Start the env server (Crafter by default, MineDojo when installed)."""
    from rlgpt.v1 import env_pb2_grpc
    from services.env_server.servicer import SERVICE_NAME, EnvServicer
    from services.env_server.settings import EnvServerSettings

    server_settings, env_settings = _load((ServerSettings, server),
                                          (EnvServerSettings, {"max_sessions": max_sessions}))
    _serve("env", server_settings, SERVICE_NAME, env_pb2_grpc.add_EnvServiceServicer_to_server,
           EnvServicer(env_settings))


@_serve_command("learner")
def serve_learner(
    server: dict[str, Any],
    env_server: EnvServerAddress = None,
    run_dir: Annotated[str | None, typer.Option(help="Directory of jobs, logs and checkpoints.")] = None,
    runner: Annotated[str | None, typer.Option(help="Default job runner: local or kubernetes.")] = None,
) -> None:
    """Start the learner (Sample Factory APPO training jobs over the env server)."""
    from rlgpt.v1 import learner_pb2_grpc
    from services.learner.servicer import SERVICE_NAME, LearnerServicer
    from services.learner.settings import LearnerSettings

    server_settings, learner_settings = _load(
        (ServerSettings, server),
        (LearnerSettings, {"env_server": env_server, "run_dir": run_dir, "runner": runner}))
    runners = None
    if learner_settings.runner == "kubernetes":
        from services.learner.jobs import LocalRunner
        from services.learner.k8s import KubernetesRunner

        runners = {"local": LocalRunner(), "kubernetes": KubernetesRunner(learner_settings)}
    servicer = LearnerServicer(learner_settings, runners)
    _serve("learner", server_settings, SERVICE_NAME, learner_pb2_grpc.add_LearnerServiceServicer_to_server, servicer)


@_serve_command("planner")
def serve_planner(
    server: dict[str, Any],
    env_server: EnvServerAddress = None,
    learner: Annotated[str | None, typer.Option(help="Learner address host:port.")] = None,
    critic: Annotated[str | None, typer.Option(help="Critic address host:port.")] = None,
    run_dir: Annotated[str | None, typer.Option(help="Directory of runs.")] = None,
    llm_base_url: LLMBaseURL = None,
    llm_model: LLMModel = None,
) -> None:
    """Start the planner (slow and fast agents). With no LLM key or URL it embeds a local llama.cpp server."""
    from rlgpt.v1 import planner_pb2_grpc
    from services.planner.servicer import SERVICE_NAME, PlannerServicer
    from services.planner.settings import PlannerSettings

    server_settings, planner_settings, llm_settings = _load(
        (ServerSettings, server),
        (PlannerSettings, {"env_server": env_server, "learner": learner, "critic": critic, "run_dir": run_dir}),
        (LLMSettings, {"base_url": llm_base_url, "model": llm_model}))
    run_dir_path = Path(planner_settings.run_dir)
    with _llm_client(llm_settings, record_dir=run_dir_path / "llm-calls", log_dir=run_dir_path) as llm:
        _serve("planner", server_settings, SERVICE_NAME, planner_pb2_grpc.add_PlannerServiceServicer_to_server,
               PlannerServicer(planner_settings, llm, llm_settings))


@_serve_command("critic")
def serve_critic(
    server: dict[str, Any],
    no_llm: Annotated[bool, typer.Option("--no-llm", help="Deterministic verdicts only; no LLM is started.")]
    = False,
    llm_base_url: LLMBaseURL = None,
    llm_model: LLMModel = None,
) -> None:
    """Start the critic (verdicts on sub-task attempts). With no LLM key or URL it embeds a local llama.cpp server."""
    from rlgpt.v1 import critic_pb2_grpc
    from services.critic.servicer import SERVICE_NAME, CriticServicer
    from services.critic.settings import CriticSettings

    server_settings, critic_settings, llm_settings = _load(
        (ServerSettings, server),
        (CriticSettings, {"use_llm": False if no_llm else None}),
        (LLMSettings, {"base_url": llm_base_url, "model": llm_model}))
    with _llm_client(llm_settings) if critic_settings.use_llm else contextlib.nullcontext() as llm:
        _serve("critic", server_settings, SERVICE_NAME, critic_pb2_grpc.add_CriticServiceServicer_to_server,
               CriticServicer(critic_settings, llm))


@serve_app.command("llm-relay")
def serve_llm_relay(
    dir: Annotated[Path, typer.Option("--dir", help="Requests go to DIR/requests/NNNN.json; answers are read from "
                                                    "DIR/answers/NNNN.json.")],
    port: Annotated[int, typer.Option(help="HTTP port; 0 picks a free one.", min=0, max=65535)] = 8090,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    answer_timeout: Annotated[float, typer.Option(help="Seconds a request waits for its answer file (then HTTP "
                                                       "504; the client's retry waits again).", min=1)] = 1800.0,
    log_level: LogLevel = "INFO",
) -> None:
    """An OpenAI-compatible LLM server answered by files: a person, another system or a capable model that sees
    only the request file writes each answer. For debugging and evaluation (see the README)."""
    setup_logging(log_level)
    import signal
    import threading

    from rlgpt.llm.chat_server import ChatServer
    from rlgpt.llm.relay import DirectoryAnswerer

    answerer = DirectoryAnswerer(dir.resolve(), timeout_seconds=answer_timeout)
    stop = threading.Event()
    with ChatServer(answerer, host=host, port=port) as server:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        log.info("LLM relay on %s: requests in %s, answers expected in %s; point the planner and the critic at it "
                 "with RLGPT_LLM_BASE_URL=%s and a long RLGPT_LLM_TIMEOUT_SECONDS (e.g. %d)", server.base_url,
                 answerer.requests, answerer.answers, server.base_url, int(answer_timeout))
        print(f"RLGPT_READY service=llm-relay port={server.port} base_url={server.base_url}", flush=True)
        stop.wait()
        answerer.close()


def _serve(name: str, server_settings: Any, service_name: str, add_fn: Any, servicer: Any) -> None:
    """Starts one service, prints the ready line scripts wait for, and serves until SIGTERM/SIGINT."""
    from rlgpt import metrics
    from rlgpt.grpc_server import ServiceBinding, create_server, serve_until_signal

    server, bound = create_server(
        f"{server_settings.host}:{server_settings.port}", [ServiceBinding(service_name, add_fn, servicer)],
        max_workers=server_settings.max_workers, max_streams=server_settings.max_streams,
        max_message_mb=server_settings.max_message_mb, metrics_label=name)
    metrics_bound = metrics.start_metrics_server(server_settings.metrics_port, server_settings.host)

    def announce() -> None:
        log.info("%s ready: grpc port %d, metrics port %s", name, bound, metrics_bound)
        # One machine-readable line for scripts that start the server with port 0.
        print(f"RLGPT_READY service={name} port={bound} metrics_port={metrics_bound or -1}", flush=True)

    serve_until_signal(server, server_settings.grace_seconds, ready=announce)


@contextlib.contextmanager
def _llm_client(llm_settings: LLMSettings, **kwargs: Any) -> Iterator[Any]:
    """The LLM client (``make_client``); an embedded server started for it is stopped on the way out."""
    from rlgpt.llm.factory import make_client

    llm, local_server = make_client(llm_settings, **kwargs)
    try:
        yield llm
    finally:
        if local_server is not None:
            local_server.stop()
