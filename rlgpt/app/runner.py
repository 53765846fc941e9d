"""`rlgpt run`: composes the four services on loopback (or uses a given planner) and follows a run live."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.protobuf import json_format
from rich.console import Console

from rlgpt import deadlines
from rlgpt.app.follow_run import follow
from rlgpt.app.launcher import ServiceProcess, start_service
from rlgpt.app.report_fetch import fetch_report
from rlgpt.config import LLMSettings
from rlgpt.errors import FailedPrecondition, InvalidArgument, ServiceFailed, Unavailable
from rlgpt.grpc_client import create_channel
from rlgpt.llm.chat_server import ChatServer
from rlgpt.llm.factory import embedded_env, needs_local_server
from rlgpt.llm.local_server import LocalLLMServer
from rlgpt.llm.replay import RecordedCalls, ReplayAnswerer
from rlgpt.machine import cpu_cores
from rlgpt.v1 import common_pb2, planner_pb2, planner_pb2_grpc

log = logging.getLogger(__name__)


@dataclasses.dataclass
class RunOptions:
    """What `rlgpt run` was asked to do."""

    task: str
    success: str
    mode: str
    agents: str
    resume: Path | None
    """A run to continue: a run id the planner knows (``--planner``: the last part of a path is taken as the id, so
    ``runs/<run_id>`` works too), or a local run directory (with request.json; services started here, the planner
    with that directory's folder as its runs directory: it is asked for the run by id)."""
    runs_dir: Path
    """Where run directories are created (services started here) and where each run's report is saved."""
    # The budgets the user typed, sent as they are; None: the planner's default. The planner alone defaults and
    # checks budgets (a refused value comes back as InvalidArgument).
    outer: int | None = None
    inner: int | None = None
    frames_per_training: int | None = None
    total_frames: int | None = None
    """0: unbounded."""
    eval_episodes: int | None = None
    target: float | None = None
    """The whole task's success rate at which the run is done (Budgets.target_success)."""
    candidates: int | None = None
    seed: int = 0
    planner: str = ""
    replay: Path | None = None
    env_servers: int = 0
    """Env servers the local services include (0: one per core). The planner uses the first; trainings put
    each rollout worker's session on them in turn (RLGPT_LEARNER_ENV_SERVERS), so that Crafter steps on every
    core: one env server process steps its sessions on one core (make bench-learner)."""


def budgets(options: RunOptions) -> planner_pb2.Budgets:
    """The budgets the user gave; the others stay unset, for the planner to default."""
    given = {"max_outer_iterations": options.outer, "max_inner_iterations": options.inner,
             "env_frames_per_training": options.frames_per_training, "total_env_frames": options.total_frames,
             "eval_episodes": options.eval_episodes, "candidates": options.candidates,
             "target_success": options.target}
    return planner_pb2.Budgets(**{name: value for name, value in given.items() if value is not None})


def task_spec(task: str, success: str) -> common_pb2.TaskSpec:
    """A TaskSpec from the CLI: an achievement name, or free text plus ``--success`` (achievement or item:count)."""
    spec = common_pb2.TaskSpec(name=task.strip().replace(" ", "_")[:48] or "task", description=task)
    if success:
        if ":" in success:
            item, _, count = success.partition(":")
            if not count.isdigit():
                raise InvalidArgument(f"--success {success!r}: use item:count, e.g. wood:3")
            spec.success.append(common_pb2.Condition(inventory=common_pb2.ItemCount(item=item, count=int(count))))
        else:
            spec.success.append(common_pb2.Condition(achievement=success))
    return spec


def replay_library(source: Path, runs_dir: Path) -> Path:
    """A fresh copy of the skill library the recorded run started with (its ``library_start.json``; a run
    recorded without one started empty): the prompts quote the library, so a replay must start from the same."""
    path = runs_dir / "replay-libraries" / f"{source.resolve().name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    start = source / "library_start.json"
    path.write_text(start.read_text() if start.exists() else "[]")
    return path


def recorded_request(run_dir: Path) -> planner_pb2.StartRunRequest:
    """The request a recorded run started with (its ``request.json``), for ``--replay``."""
    path = run_dir / "request.json"
    if not path.exists():
        raise FailedPrecondition(f"{run_dir} is not a run directory (no request.json): --replay takes a run "
                                 "directory with request.json and llm/")
    try:
        request = json_format.Parse(path.read_text(), planner_pb2.StartRunRequest())
    except (json_format.ParseError, ValueError) as exc:
        raise FailedPrecondition(f"{path} cannot be read ({str(exc)[:200]}); it is not a run's request") from None
    if request.resume_run_dir or request.resume_run_id:
        raise FailedPrecondition(f"{path} resumes another run; replay the run it started from")
    return request


def env_server_count(options: RunOptions) -> int:
    """How many env servers the local services include: the option's, or one per core this process may use."""
    return options.env_servers or cpu_cores()


@contextlib.contextmanager
def local_services(options: RunOptions, log_dir: Path,
                   service_env: dict[str, str] | None = None) -> Iterator[dict[str, ServiceProcess]]:
    """Starts env, learner, critic and planner (and the embedded LLM when needed); yields them by name.

    ``service_env``: settings the services get on top of this process's (a replay's LLM server and skill
    library). Each service gets its settings through ``start_service(env=...)``; this process's environment
    is left as it is."""
    started: list[ServiceProcess] = []
    llm_server: LocalLLMServer | None = None
    child_env = dict(service_env or {})
    environ = {**os.environ, **child_env}  # what a service sees, before what is added for it here
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        llm = LLMSettings.load(environ=environ)
        if options.mode != "pure-rl" and needs_local_server(llm):
            llm_server = LocalLLMServer(llm, log_path=log_dir / "llm-server.log").start()
            # Both the planner and the critic talk to the one embedded server.
            child_env.update(embedded_env(llm, llm_server.base_url))
        envs = []
        for i in range(env_server_count(options)):
            envs.append(start_service("env", log_dir, log_name="env" if i == 0 else f"env-{i + 1}", env=child_env))
            started.append(envs[-1])
        env = envs[0]
        learner = start_service("learner", log_dir, extra_args=(
            "--env-server", env.target, "--run-dir", str(options.runs_dir / "learner")),
            env={**child_env, "RLGPT_LEARNER_ENV_SERVERS": ",".join(e.target for e in envs)}
            if len(envs) > 1 and not environ.get("RLGPT_LEARNER_ENV_SERVERS") else child_env)
        started.append(learner)
        critic_args = ("--no-llm",) if options.mode == "pure-rl" else ()
        critic = start_service("critic", log_dir, extra_args=critic_args, env=child_env)
        started.append(critic)
        # One skill library across the runs of runs_dir, unless this process or service_env names another.
        library = {"RLGPT_PLANNER_LIBRARY_PATH": str(options.runs_dir / "skill_library.json")}
        planner = start_service("planner", log_dir, extra_args=(
            "--env-server", env.target, "--learner", learner.target, "--critic", critic.target,
            "--run-dir", str(options.runs_dir)), env={**library, **environ, **child_env})
        started.append(planner)
        yield {service.log_path.stem: service for service in started}  # env, env-2, ..., learner, critic, planner
    finally:
        for service in reversed(started):
            service.stop()
        if llm_server is not None:
            llm_server.stop()


def _resume_request(options: RunOptions, resume: Path) -> planner_pb2.StartRunRequest:
    """The StartRunRequest of ``--resume``: always a run id (a planner resumes only runs of its own runs directory,
    by id). A local run directory (services started here) gives its name as the id and its folder as the runs
    directory of the planner started here."""
    if not options.planner and (resume / "request.json").exists():
        local = resume.resolve()
        options.runs_dir = local.parent  # the planner started here works in the run's own folder
        return planner_pb2.StartRunRequest(resume_run_id=local.name)
    if not options.planner and len(resume.parts) != 1:
        raise FailedPrecondition(f"{resume} is not a run directory (no request.json); --resume takes a run "
                                 "directory or a run id")
    return planner_pb2.StartRunRequest(resume_run_id=resume.name)


def run_rlgpt(options: RunOptions) -> Path:
    """Starts (or resumes) a run, follows it, saves its report (from the planner) under ``runs_dir/<run id>``;
    returns the local report path."""
    console = Console(stderr=True)
    if options.replay is not None and (options.planner or options.resume is not None):
        raise InvalidArgument("--replay starts a new run on services started here; it cannot be combined with "
                              f"--{'planner' if options.planner else 'resume'}")
    request = planner_pb2.StartRunRequest(
        task=task_spec(options.task, options.success), mode=options.mode, agents=options.agents, seed=options.seed,
        budgets=budgets(options))
    if options.resume is not None:
        request = _resume_request(options, Path(options.resume))
    options.runs_dir = options.runs_dir.resolve()
    options.runs_dir.mkdir(parents=True, exist_ok=True)
    log_dir = options.runs_dir / "logs"
    with contextlib.ExitStack() as stack:
        replay, llm_env = None, None
        if options.replay is not None:
            request = recorded_request(options.replay)
            options.mode = request.mode or options.mode  # pure-rl starts no LLM; the recorded mode decides
            replay = stack.enter_context(ChatServer(ReplayAnswerer(options.replay / "llm"), model="replay"))
            llm_env = {"RLGPT_LLM_BASE_URL": replay.base_url, "RLGPT_LLM_MODEL": "replay",
                       "RLGPT_LLM_STRUCTURED": "json_schema",
                       "RLGPT_PLANNER_LIBRARY_PATH": str(replay_library(options.replay, options.runs_dir))}
            console.print(f"replaying the LLM calls of {options.replay} (skills and trainings run live)")
        services = None if options.planner else stack.enter_context(local_services(options, log_dir, llm_env))
        planner_target = options.planner or services["planner"].target
        # A planner that is gone raises ServiceFailed, naming it and its address (never a gRPC traceback).
        channel = create_channel(planner_target, default_timeout=deadlines.START_RUN_SECONDS, wait_ready_seconds=60,
                                 peer="planner")
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        try:
            started = stub.StartRun(request)
        except grpc.RpcError as exc:
            raise InvalidArgument(f"the planner refused the run: {exc.code().name}: {exc.details()}") from None
        console.print(f"run {started.run_id} (on the planner at {planner_target}, in its {started.run_dir})")
        local_dir = options.runs_dir / started.run_id  # the run directory itself when the planner runs here
        again = (f"--resume {started.run_id} --planner {options.planner}" if options.planner
                 else f"--resume {local_dir}")
        try:
            last = follow(stub, started.run_id, console)
        except ServiceFailed as exc:
            raise Unavailable(f"{exc}: run {started.run_id} stopped with it, its state kept up to its last step. "
                              f"Resume with: rlgpt run {again} once the planner is back") from None
        report = fetch_report(stub, started.run_id, local_dir)
        channel.close()
    if replay is not None:
        _write_replay_summary(local_dir, options.replay, replay.answerer.calls, console)
    if last is not None and last.WhichOneof("payload") == "error":
        where = f"; partial report {report}" if report else ""
        raise Unavailable(f"the run stopped: {last.error.message}{where}. Resume with: rlgpt run {again}")
    if report is None:
        raise Unavailable(f"the planner has no report of run {started.run_id} (see the planner's log)")
    measure = ("" if last is None else f"final score {last.run_end.score:.1f}; " if last.run_end.HasField("score")
               else f"final success {last.run_end.success_rate:.0%}; ")  # a game task is measured by its score
    console.print(f"{measure}report: {report}")
    return report


def _write_replay_summary(run_dir: Path, source: Path, calls: RecordedCalls, console: Console) -> None:
    """How closely the replay followed the record, in ``replay.json`` beside the run's other files."""
    summary = {"source": str(source), "recorded_calls": calls.total, "replayed_calls": sum(calls.taken.values()),
               "same_prompt": calls.same_prompt, "unused": calls.left()}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "replay.json").write_text(json.dumps(summary, indent=1))
    console.print(calls.summary())
