"""``rlgpt.v1.PlannerService``: runs of the slow and fast agents, streamed as events."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc

from rlgpt import deadlines, metrics
from rlgpt.config import LLMSettings
from rlgpt.errors import (
    MAX_REFUSAL_BYTES,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    RlgptError,
    ServiceFailed,
    found,
    grpc_errors,
    join_problems,
    shown,
)
from rlgpt.grpc_client import create_channel
from rlgpt.llm.cancel import cancelled_by
from rlgpt.llm.metered import MeteredLLM
from rlgpt.prompts import CompletesJSON
from rlgpt.v1 import critic_pb2_grpc, env_pb2, env_pb2_grpc, learner_pb2_grpc, planner_pb2, planner_pb2_grpc
from services.planner.budgets import budget_problems, evaluation_problems, resolve_budgets
from services.planner.context import AgentSetup, Mode, StopRequested, Stubs
from services.planner.limits import PLANNER_LIMITS
from services.planner.loops import TwoLoops
from services.planner.report import outcome, report_chunks, write_run_report
from services.planner.runs import Run, check_run_id, own_run_dir, run_id_of_dir
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState

log = logging.getLogger(__name__)
SERVICE_NAME = planner_pb2.DESCRIPTOR.services_by_name["PlannerService"].full_name
MODES = tuple(Mode)
AGENT_SETUPS = tuple(AgentSetup)


class PlannerServicer(planner_pb2_grpc.PlannerServiceServicer):
    """Starts runs in background threads; each run's events are kept in memory and in its directory."""

    def __init__(self, settings: PlannerSettings, llm: CompletesJSON | None, llm_settings: LLMSettings | None = None):
        """``llm_settings``: the LLM settings (the planner's, shared by the critic) that bound the critic's calls
        (:mod:`rlgpt.deadlines`); None: their defaults."""
        self.settings = settings
        self.request_limits = PLANNER_LIMITS
        self.llm = MeteredLLM(llm) if llm is not None else None
        self.library = SkillLibrary(Path(settings.library_path))
        self.judge_seconds = deadlines.judge_seconds(llm_settings or LLMSettings())
        # A call with no deadline of its own gets the channel's: the serving side bounds those calls itself. A
        # service that is gone or does not answer in time raises ServiceFailed naming it: the run pauses for it,
        # and no skill, config or agent is blamed for it. A service busy with as many long calls (skill tests,
        # evaluations, verdicts) as it serves at once is asked again until the call's deadline.
        self._channels = [create_channel(settings.env_server, default_timeout=deadlines.SERVED_SECONDS,
                                         peer="env server", wait_when_busy=True)]
        self.env = env_pb2_grpc.EnvServiceStub(self._channels[0])
        self.learner = self.critic = None
        if settings.learner:
            self._channels.append(create_channel(settings.learner, default_timeout=deadlines.SERVED_SECONDS,
                                                 peer="learner", wait_when_busy=True))
            self.learner = learner_pb2_grpc.LearnerServiceStub(self._channels[-1])
        if settings.critic:
            self._channels.append(create_channel(settings.critic, default_timeout=self.judge_seconds, peer="critic",
                                                 wait_when_busy=True))
            self.critic = critic_pb2_grpc.CriticServiceStub(self._channels[-1])
        self.runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        for run in list(self.runs.values()):
            run.stop_requested.set()
        for channel in self._channels:
            channel.close()

    def _validate(self, request: planner_pb2.StartRunRequest) -> env_pb2.DescribeResponse:
        """Checks the request; the task is checked and spelled out by the env server (``request.task`` is
        replaced by its answer, so every later step sees explicit success conditions)."""
        problems = []
        if not request.task.name and not request.task.description:
            problems.append("task: give a name (e.g. an achievement the env server's Describe lists) or a description")
        if request.mode and request.mode not in MODES:
            problems.append(f"mode={shown(request.mode)}: must be one of {', '.join(MODES)}")
        if request.agents and request.agents not in AGENT_SETUPS:
            problems.append(f"agents={shown(request.agents)}: must be one of {', '.join(AGENT_SETUPS)}")
        problems.extend(budget_problems(request.budgets, self.settings))
        if request.mode == Mode.PURE_RL and self.learner is None:
            problems.append("mode=pure-rl needs a learner (RLGPT_PLANNER_LEARNER)")
        if problems:
            raise InvalidArgument(join_problems(problems, max_bytes=MAX_REFUSAL_BYTES))
        try:
            describe = self.env.Describe(env_pb2.DescribeRequest(backend=request.backend),
                                         timeout=deadlines.QUICK_SECONDS)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgument(exc.details()) from None
            raise FailedPrecondition(f"env server at {self.settings.env_server} did not answer: "
                                     f"{exc.code().name} {exc.details()}") from None
        if not describe.available:
            raise FailedPrecondition(describe.unavailable_reason)
        try:
            resolved = self.env.ResolveTask(env_pb2.ResolveTaskRequest(backend=request.backend, task=request.task),
                                            timeout=deadlines.QUICK_SECONDS)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgument(exc.details()) from None
            if exc.code() == grpc.StatusCode.NOT_FOUND:  # a task name the env server does not offer: it lists those
                raise NotFound(exc.details()) from None
            raise FailedPrecondition(f"env server at {self.settings.env_server} did not check the task: "
                                     f"{exc.code().name} {exc.details()}") from None
        request.task.CopyFrom(resolved.task)
        budgets = resolve_budgets(request.budgets, self.settings, request.task)
        if problems := evaluation_problems(budgets, describe, self.settings, request.task):
            raise InvalidArgument(join_problems(problems, max_bytes=MAX_REFUSAL_BYTES))
        return describe

    @grpc_errors
    def StartRun(self, request: planner_pb2.StartRunRequest,
                 context: grpc.ServicerContext) -> planner_pb2.StartRunResponse:
        resumed = None
        if request.resume_run_dir and request.resume_run_id:
            raise InvalidArgument("set resume_run_id or resume_run_dir, not both (prefer resume_run_id)")
        if request.resume_run_id or request.resume_run_dir:
            # Only this planner's own runs, by id: a client's path is never opened, nor said to exist or not.
            run_id = request.resume_run_id or run_id_of_dir(request.resume_run_dir, Path(self.settings.run_dir))
            run_dir, _ = self._find(run_id, "resume_run_id")
            resumed = Run.resume(run_dir)
            RunState.load(resumed.dir)  # a corrupt state file is reported now, not in the run's thread
            request = resumed.request
        describe = self._validate(request)
        if self.llm is None and (request.mode or Mode.RL_GPT) != Mode.PURE_RL:
            raise FailedPrecondition("this planner has no LLM; only mode=pure-rl can run")
        with self._lock:
            active = sum(r.active for r in self.runs.values())
            if active >= self.settings.max_active_runs:
                raise ResourceExhausted(f"{active} runs are active, the planner's limit; stop one or wait")
            if resumed is not None and resumed.id in self.runs and self.runs[resumed.id].active:
                raise FailedPrecondition(f"run {resumed.id} is still active")
            run = resumed or Run.create(Path(self.settings.run_dir), request)
            if resumed is None:
                self.library.snapshot(run.dir / "library_start.json")
            self.runs[run.id] = run
        metrics.PLANNER_RUNS_ACTIVE.inc()
        threading.Thread(target=self._execute, args=(run, describe), daemon=True, name=f"run-{run.id}").start()
        return planner_pb2.StartRunResponse(run_id=run.id, run_dir=str(run.dir))

    def _execute(self, run: Run, describe: env_pb2.DescribeResponse) -> None:
        state: RunState | None = None
        try:
            state = RunState.load(run.dir)
            loops = TwoLoops(run, state, describe, self.llm, self.library,
                             Stubs(self.env, self.learner, self.critic, self.judge_seconds), self.settings)
            with cancelled_by(run.stop_requested, StopRequested):  # a stop does not wait for an answer
                loops.execute()
            final = state.final or {}
            report = self._write_report(run, state, planner_pb2.RUN_STATE_DONE)
            run.emit(run_end=planner_pb2.RunEnd(success_rate=float(final.get("success_rate", 0.0)),
                                                report=str(report or ""), frames_used=state.frames_used,
                                                controller=str(final.get("controller", "")),
                                                score=final.get("score")))  # a game task's measure
            run.finish(planner_pb2.RUN_STATE_DONE)
        except StopRequested:
            self._write_report(run, state, planner_pb2.RUN_STATE_STOPPED)
            run.emit(error=planner_pb2.ErrorEvent(message="stopped on request; resumable", resumable=True))
            run.finish(planner_pb2.RUN_STATE_STOPPED, "stopped on request")
        except Exception as exc:  # a run's thread must never die silently
            message, resumable = describe_failure(exc)
            if resumable:
                log.warning("run %s paused: %s", run.id, message)
            else:
                log.exception("run %s crashed", run.id)
            self._write_report(run, state, planner_pb2.RUN_STATE_FAILED, message)
            run.emit(error=planner_pb2.ErrorEvent(message=message, resumable=resumable))
            run.finish(planner_pb2.RUN_STATE_FAILED, message)
        finally:
            metrics.PLANNER_RUNS_ACTIVE.dec()

    @staticmethod
    def _write_report(run: Run, state: RunState | None, end: int, error: str = "") -> Path | None:
        """Writes the run's report before its last event, so a client that saw the run end can fetch it."""
        try:
            path = write_run_report(run.dir, state, outcome(end, error))
        except Exception as exc:  # a report that cannot be written must not hide how the run ended
            log.exception("run %s: the report could not be written", run.id)
            run.report_problem = f"{type(exc).__name__}: {str(exc)[:300]}"
            return None
        run.report_problem = ""
        return path

    def _find(self, run_id: str, field: str = "run_id") -> tuple[Path, Run | None]:
        """A run's directory (and the run, when this process has it in memory) from a well-formed run id."""
        check_run_id(run_id, field)
        run = self.runs.get(run_id)
        if run is not None:
            return run.dir, run
        run_dir = own_run_dir(Path(self.settings.run_dir), run_id)
        if run_dir is None:
            raise NotFound(f"no run {shown(run_id)} on this planner: it is not running here nor among its runs")
        return run_dir, None

    def _run(self, run_id: str) -> Run:
        return found(self.runs.get(run_id), f"no run {shown(run_id)} on this planner")

    @grpc_errors
    def WatchRun(self, request: planner_pb2.WatchRunRequest,
                 context: grpc.ServicerContext) -> Iterator[planner_pb2.RunEvent]:
        run = self._run(request.run_id)
        if request.after_seq < 0:
            raise InvalidArgument(f"after_seq={request.after_seq} must be >= 0")
        yield from run.watch(request.after_seq, context.is_active)

    @grpc_errors
    def GetRun(self, request: planner_pb2.GetRunRequest, context: grpc.ServicerContext) -> planner_pb2.RunStatus:
        return self._run(request.run_id).status()

    @grpc_errors
    def StopRun(self, request: planner_pb2.StopRunRequest, context: grpc.ServicerContext) -> planner_pb2.RunStatus:
        run = self._run(request.run_id)
        run.stop_requested.set()
        return run.status()

    @grpc_errors
    def GetRunReport(self, request: planner_pb2.GetRunReportRequest,
                     context: grpc.ServicerContext) -> Iterator[planner_pb2.ReportChunk]:
        run_dir, run = self._find(request.run_id)
        if run is not None and run.active:
            raise FailedPrecondition(f"run {run.id} is still running; its report is written when it ends, fails or "
                                     "stops (WatchRun until its run_end or error event, then ask again)")
        if not (run_dir / "report.md").is_file():
            why = f": writing it failed ({run.report_problem})" if run is not None and run.report_problem else ""
            raise FailedPrecondition(f"run {shown(request.run_id)} has no report{why}; resuming the run "
                                     "(StartRun with resume_run_id) writes one when it ends")
        yield from report_chunks(run_dir)

    @grpc_errors
    def DescribePlanner(self, request: planner_pb2.DescribePlannerRequest,
                        context: grpc.ServicerContext) -> planner_pb2.DescribePlannerResponse:
        return planner_pb2.DescribePlannerResponse(requests=self.request_limits.to_proto())


def describe_failure(exc: BaseException) -> tuple[str, bool]:
    """Message and resumability of an error that ended a run."""
    if isinstance(exc, StopRequested):
        return "stopped on request; resume with --resume", True
    if isinstance(exc, ServiceFailed):
        return f"{exc}; the run is paused: resume it with --resume once the {exc.service} is back", True
    if isinstance(exc, RlgptError):
        return str(exc), True
    if isinstance(exc, grpc.RpcError):
        return f"a service failed: {exc.code().name}: {exc.details()}; resume with --resume once it is back", True
    return f"{type(exc).__name__}: {exc}", False
