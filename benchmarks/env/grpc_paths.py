"""bench-env's gRPC paths: the env server as a child process, its sessions, and unary, pinned-unary and
streaming runners over it."""

from __future__ import annotations

import functools
import logging
import os
import queue
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from rich.progress import Progress

from benchmarks.common import MIB
from benchmarks.env.measure import Plan
from benchmarks.env.runners import Runner
from rlgpt.app.launcher import ServiceProcess, start_service
from rlgpt.tensors import from_tensor
from rlgpt.v1 import env_pb2, env_pb2_grpc

log = logging.getLogger("benchmarks.env")


# --- the server in a separate process ---------------------------------------------------------------
def start_server(max_envs: int, log_dir: Path) -> ServiceProcess:
    """``rlgpt serve env`` as a child process on a free port, with /metrics on a free port too: the server's
    own Step-time histogram separates its work from transport."""
    server = start_service("env", log_dir, env={"RLGPT_ENV_MAX_ENVS_PER_SESSION": str(max_envs)},
                           start_timeout=60)
    log.info("env server pid %d listening on port %d (log: %s)", server.process.pid, server.port, server.log_path)
    return server


def step_handler_seconds(server: ServiceProcess) -> float | None:
    """Total seconds the server spent inside Step handlers (session.step + response), from /metrics."""
    if server.metrics_port <= 0:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
    except OSError as exc:
        log.warning("could not read the server's metrics: %s", exc)
        return None
    match = re.search(r'^rlgpt_env_step_seconds_sum\{backend="crafter"\} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def create_session(stub: env_pb2_grpc.EnvServiceStub, envs: int, seed: int) -> str:
    response = stub.CreateSession(env_pb2.CreateSessionRequest(
        backend="crafter", seed=seed, num_envs=envs, autoreset=True, client="bench-env"), timeout=300)
    return response.session_id


def close_session(stub: env_pb2_grpc.EnvServiceStub, session_id: str) -> None:
    stub.CloseSession(env_pb2.CloseSessionRequest(session_id=session_id), timeout=60)


def step_requests(session_id: str, plan: Plan) -> list[env_pb2.StepRequest]:
    # Built before timing so the client loop only sends and receives.
    return [env_pb2.StepRequest(session_id=session_id, actions=row.tolist()) for row in plan.actions]


def consume(response: env_pb2.StepResponse, envs: int) -> None:
    """What a real client does at least: view the observation batch (zero-copy)."""
    image = from_tensor(response.observations.image)
    if image.shape[0] != envs:
        raise RuntimeError(f"expected {envs} observations, got {image.shape[0]}")



class GrpcRunner(Runner):
    """A session on the server process; requests are built before timing so the client only sends."""

    def __init__(self, plan: Plan, seed: int, progress: Progress, stub: env_pb2_grpc.EnvServiceStub,
                 server: ServiceProcess):
        super().__init__(plan, seed, progress)
        self.stub = stub
        self.server = psutil.Process(server.process.pid)
        self.handler_clock = functools.partial(step_handler_seconds, server)
        self.session_id = ""
        self.rss_before = self.rss_after = 0

    def start(self) -> None:
        self.rss_before = self.server.memory_info().rss
        self.session_id = create_session(self.stub, self.plan.envs, self.seed)
        self.rss_after = self.server.memory_info().rss
        self.requests = step_requests(self.session_id, self.plan)
        super().start()

    def close(self) -> None:
        if self.session_id:
            close_session(self.stub, self.session_id)
        super().close()


class UnaryRunner(GrpcRunner):
    path, label = "grpc_unary", "gRPC unary Step"

    def run(self, lo: int, hi: int) -> None:
        for request in self.requests[lo:hi]:
            consume(self.stub.Step(request, timeout=120), self.plan.envs)
            self._advance()


def set_process_affinity(pid: int, cpus: set[int]) -> None:
    """Affinity of every thread of ``pid`` (``sched_setaffinity`` on a pid only moves its main thread)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except (ProcessLookupError, PermissionError, OSError):
            continue  # a thread that exited meanwhile


class PinnedUnaryRunner(UnaryRunner):
    """Unary Step with every server thread pinned to one core during its slices (a diagnostic).

    The gRPC sync server runs each call on whichever pool thread is free, and those threads hop between
    cores; pinning shows how much of the gap that costs. The server's affinity is restored after each slice.
    """

    path, label = "grpc_unary_pinned", "gRPC unary Step, server on one core"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._all_cpus = os.sched_getaffinity(0)
        self._cpu = {max(self._all_cpus)}

    def run(self, lo: int, hi: int) -> None:
        assert self.server is not None
        set_process_affinity(self.server.pid, self._cpu)
        try:
            super().run(lo, hi)
        finally:
            set_process_affinity(self.server.pid, self._all_cpus)


class StreamRunner(GrpcRunner):
    """StreamSteps, one request per step, fed from a queue over one long-lived stream.

    ``lockstep``: the next request goes out only after the previous response arrived, as an actor
    that picks actions from observations must. Otherwise each round's requests are offered at once
    and gRPC flow control decides how far the client runs ahead.
    """

    def __init__(self, *args: Any, lockstep: bool, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lockstep = lockstep
        self.path = f"grpc_stream_{'lockstep' if lockstep else 'pipelined'}"
        self.label = f"gRPC StreamSteps {'lockstep' if lockstep else 'pipelined'}"
        self._feed: queue.Queue[env_pb2.StepRequest | None] = queue.Queue()
        self._responses: Iterator[env_pb2.StepResponse] | None = None

    def _from_queue(self) -> Iterator[env_pb2.StepRequest]:
        while (item := self._feed.get()) is not None:
            yield item

    def start(self) -> None:
        # The stream outlives the default deadline: it stays open across all rounds.
        self._responses = self.stub.StreamSteps(self._from_queue(), timeout=3600)
        super().start()

    def run(self, lo: int, hi: int) -> None:
        assert self._responses is not None
        if self.lockstep:
            for request in self.requests[lo:hi]:
                self._feed.put(request)
                consume(next(self._responses), self.plan.envs)
                self._advance()
        else:
            for request in self.requests[lo:hi]:
                self._feed.put(request)
            for _ in range(lo, hi):
                consume(next(self._responses), self.plan.envs)
                self._advance()

    def close(self) -> None:
        self._feed.put(None)  # ends the request stream, so the server ends the call
        if self._responses is not None:
            for _ in self._responses:
                pass
        super().close()


def session_peak_memory(stub: env_pb2_grpc.EnvServiceStub, server: ServiceProcess, envs: int, seed: int,
                        steps: int = 300) -> dict[str, float]:
    """The server's RSS growth while one session of ``envs`` envs is created and stepped ``steps`` times with
    random actions (autoreset, so worlds are regenerated too): the peak over the steps minus before creating it."""
    process = psutil.Process(server.process.pid)
    before = process.memory_info().rss
    session_id = create_session(stub, envs, seed)
    peak = after_create = process.memory_info().rss
    rng = np.random.default_rng(seed)
    try:
        for _ in range(steps):
            actions = rng.integers(0, 17, size=envs).tolist()
            stub.Step(env_pb2.StepRequest(session_id=session_id, actions=actions), timeout=120)
            peak = max(peak, process.memory_info().rss)
    finally:
        close_session(stub, session_id)
    return {"envs": envs, "steps": steps, "created_mib": (after_create - before) / MIB,
            "peak_mib": (peak - before) / MIB}
