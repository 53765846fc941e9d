"""``rlgpt.v1.PlannerService``: runs of the slow and fast agents, streamed as events."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc

from rlgpt import metrics
from rlgpt.config import PlannerSettings
from rlgpt.errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, RlgptError, grpc_errors
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import env_pb2, env_pb2_grpc, planner_pb2, planner_pb2_grpc
from services.planner.agents import CompletesJSON, FastAgent, SlowAgent
from services.planner.runs import Run
from services.planner.skill_library import SkillLibrary

log = logging.getLogger(__name__)
SERVICE_NAME = planner_pb2.DESCRIPTOR.services_by_name["PlannerService"].full_name
MODES = ("rl-gpt", "pure-rl", "pure-code")
AGENT_SETUPS = ("slow-fast-critic", "slow-fast", "one")


class PlannerServicer(planner_pb2_grpc.PlannerServiceServicer):
    """Starts runs in background threads; each run's events are kept in memory and in its directory."""

    def __init__(self, settings: PlannerSettings, llm: CompletesJSON):
        self.settings = settings
        self.llm = llm
        self.library = SkillLibrary(Path(settings.library_path))
        self._env_channel = create_channel(settings.env_server, default_timeout=300)
        self.env = env_pb2_grpc.EnvServiceStub(self._env_channel)
        self.runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        for run in list(self.runs.values()):
            run.stop_requested.set()
        self._env_channel.close()

    def _validate(self, request: planner_pb2.StartRunRequest) -> env_pb2.DescribeResponse:
        problems = []
        if not request.task.name and not request.task.description:
            problems.append("task: give a name (e.g. a Crafter achievement) or a description")
        if request.mode and request.mode not in MODES:
            problems.append(f"mode={request.mode!r}: must be one of {', '.join(MODES)}")
        if request.agents and request.agents not in AGENT_SETUPS:
            problems.append(f"agents={request.agents!r}: must be one of {', '.join(AGENT_SETUPS)}")
        b = request.budgets
        for name, value, high in (("max_outer_iterations", b.max_outer_iterations, 20),
                                  ("max_inner_iterations", b.max_inner_iterations, 20),
                                  ("eval_episodes", b.eval_episodes, 64), ("candidates", b.candidates, 16)):
            if not 0 <= value <= high:
                problems.append(f"budgets.{name}={value} must be in 0..{high} (0 means the default)")
        if b.env_frames_per_training < 0 or b.max_tokens < 0:
            problems.append("budgets: env_frames_per_training and max_tokens must be >= 0")
        if problems:
            raise InvalidArgument("; ".join(problems))
        if request.resume_run_dir:
            raise FailedPrecondition("this planner does not resume runs yet; start a new run")
        try:
            describe = self.env.Describe(env_pb2.DescribeRequest(backend=request.backend), timeout=30)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgument(exc.details()) from None
            raise FailedPrecondition(f"env server at {self.settings.env_server} did not answer: "
                                     f"{exc.code().name} {exc.details()}") from None
        if not describe.available:
            raise FailedPrecondition(describe.unavailable_reason)
        if request.task.name and not request.task.success and request.task.name not in describe.achievements:
            raise InvalidArgument(f"unknown task {request.task.name!r}: not an achievement of {describe.backend} and "
                                  "no success conditions given")
        return describe

    @grpc_errors
    def StartRun(self, request: planner_pb2.StartRunRequest,
                 context: grpc.ServicerContext) -> planner_pb2.StartRunResponse:
        describe = self._validate(request)
        with self._lock:
            active = sum(r.active for r in self.runs.values())
            if active >= self.settings.max_active_runs:
                raise ResourceExhausted(f"{active} runs are active, the planner's limit; stop one or wait")
            run = Run.create(Path(self.settings.run_dir), request)
            self.runs[run.id] = run
        metrics.PLANNER_RUNS_ACTIVE.inc()
        threading.Thread(target=self._execute, args=(run, describe), daemon=True, name=f"run-{run.id}").start()
        return planner_pb2.StartRunResponse(run_id=run.id, run_dir=str(run.dir))

    def _execute(self, run: Run, describe: env_pb2.DescribeResponse) -> None:
        try:
            self.single_pass(run, describe)
            run.finish(planner_pb2.RUN_STATE_STOPPED if run.stop_requested.is_set() else planner_pb2.RUN_STATE_DONE)
        except RlgptError as exc:
            log.warning("run %s: %s", run.id, exc)
            metrics.PLANNER_LLM_ERRORS.labels("run", type(exc).__name__).inc()
            run.emit(error=planner_pb2.ErrorEvent(message=str(exc), resumable=True))
            run.finish(planner_pb2.RUN_STATE_FAILED, str(exc))
        except Exception as exc:
            log.exception("run %s crashed", run.id)
            run.emit(error=planner_pb2.ErrorEvent(message=f"{type(exc).__name__}: {exc}", resumable=False))
            run.finish(planner_pb2.RUN_STATE_FAILED, str(exc))
        finally:
            metrics.PLANNER_RUNS_ACTIVE.dec()

    def single_pass(self, run: Run, describe: env_pb2.DescribeResponse) -> None:
        """One plan and one fast-agent step per sub-task (the two loops of RL-GPT iterate on this)."""
        request = run.request
        slow = SlowAgent(self.llm, describe, self.library)
        fast = FastAgent(self.llm, self.env, describe, self.library, test_episodes=self.settings.test_episodes,
                         test_steps=self.settings.test_steps, seed=request.seed)
        plan, record = slow.plan(request.task, iteration=run.iteration)
        run.llm_call(record)
        run.plan = plan
        run.emit(plan=plan)
        frames = request.budgets.env_frames_per_training or self.settings.env_frames_per_training
        for subtask in plan.subtasks:
            if run.stop_requested.is_set():
                return
            if subtask.decision == planner_pb2.DECISION_CODE:
                candidates = fast.write_skill(subtask, iteration=run.iteration,
                                              candidates=request.budgets.candidates or self.settings.candidates)
                for c in candidates:
                    if c.record is not None:
                        run.llm_call(c.record, subtask.name)
                    run.emit(subtask.name, code=planner_pb2.CodeEvent(
                        skill=subtask.name, code=c.answer.code if c.answer else "", candidate=c.index,
                        success_rate=c.success_rate, error=c.error))
            else:
                config, record = fast.write_rl_config(subtask, env_frames=frames, iteration=run.iteration)
                run.llm_call(record, subtask.name)
                run.emit(subtask.name, config=config)
        run.save_status()

    def _run(self, run_id: str) -> Run:
        run = self.runs.get(run_id)
        if run is None:
            raise NotFound(f"no run {run_id!r} on this planner")
        return run

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
