"""Crafter stepping throughput: in-process vs. through the env server (unary Step and StreamSteps).

``make bench-env`` runs ``python -m benchmarks.bench_env --output docs/BENCHMARKS.md``. Every path replays
the same seeds and the same pre-generated random actions over the same number of steps, so each one does
the same Crafter work and only the overhead around it differs. Results go into one section of the
markdown file (other sections are kept) and, raw, into ``docs/bench-raw/env.json``.
"""

from __future__ import annotations

import cProfile
import dataclasses
import datetime as dt
import functools
import gc
import json
import logging
import math
import os
import platform
import pstats
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import crafter
import grpc
import numpy as np
import psutil
import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from benchmarks.common import write_section
from rlgpt.config import EnvServerSettings
from rlgpt.grpc_client import create_channel
from rlgpt.launcher import ServiceProcess, start_service
from rlgpt.tensors import from_tensor
from rlgpt.v1 import env_pb2, env_pb2_grpc
from services.env_server.backends.crafter import CrafterBackend

log = logging.getLogger("benchmarks.bench_env")
console = Console(stderr=True)

REPO_ROOT = Path(__file__).resolve().parent.parent
SECTION_TITLE = "## Env server throughput (make bench-env)"
GOAL_RATIO = 0.85
NUM_ACTIONS = len(CrafterBackend.spec.actions)
EPISODE_LENGTH = CrafterBackend.spec.default_episode_length
WARMUP_FRAMES = 400  # about 0.4 s of stepping: first renders fill texture caches, HTTP/2 windows grow
MIB = 1024 * 1024


# --- results ----------------------------------------------------------------------------------------
@dataclasses.dataclass
class Measurement:
    """One timed run: ``steps`` batched steps of ``envs`` envs after ``warmup`` untimed ones."""

    path: str
    envs: int
    warmup: int
    steps: int
    seconds: float
    extra: dict[str, float] = dataclasses.field(default_factory=dict)
    round_rates: list[float] = dataclasses.field(default_factory=list)

    @property
    def frames_per_s(self) -> float:
        return self.envs * self.steps / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "frames_per_s": self.frames_per_s}


@dataclasses.dataclass(frozen=True)
class Plan:
    """Step counts and the actions every path replays for one env count."""

    envs: int
    warmup: int
    steps: int
    actions: np.ndarray  # (warmup + steps, envs) action ids


def action_rows(seed: int, envs: int, rows: int) -> np.ndarray:
    # One generator per env count, so a plan's actions do not depend on which other counts ran.
    return np.random.default_rng([seed, envs]).integers(0, NUM_ACTIONS, size=(rows, envs), dtype=np.int32)


def rss(pid: int | None = None) -> int:
    return psutil.Process(pid).memory_info().rss


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


class StepTracker:
    """A rich progress task for one measurement, advanced in coarse chunks so it costs nothing."""

    def __init__(self, progress: Progress, label: str, total: int):
        self._progress = progress
        self._task = progress.add_task(label, total=total)
        self._every = max(1, total // 100)
        self._pending = 0

    def advance(self) -> None:
        self._pending += 1
        if self._pending >= self._every:
            self._progress.advance(self._task, self._pending)
            self._pending = 0

    def done(self) -> None:
        self._progress.advance(self._task, self._pending)
        self._pending = 0
        self._progress.update(self._task, visible=False)


def thread_schedstat(pid: int) -> dict[int, tuple[float, float]]:
    """Per thread of ``pid``: (seconds on a CPU, seconds runnable but waiting for one), from schedstat."""
    stats: dict[int, tuple[float, float]] = {}
    for path in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            on_cpu, waiting = path.read_text().split()[:2]
            stats[int(path.parent.name)] = (int(on_cpu) / 1e9, int(waiting) / 1e9)
        except (OSError, ValueError):
            continue  # a thread that exited between listing and reading
    return stats


def busiest_thread_wait(before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]]) -> float:
    """Run-queue wait of the thread that ran most in between: the one stepping the envs."""
    deltas = [(cpu - before.get(tid, (0.0, 0.0))[0], wait - before.get(tid, (0.0, 0.0))[1])
              for tid, (cpu, wait) in after.items()]
    return max(deltas)[1] if deltas else 0.0


class CpuWindow:
    """CPU use over a timed window: this process, the server (if any) and everything else on the machine.

    The machine is shared, so other processes' load is recorded next to every number it may have skewed,
    together with the run-queue wait of the threads on the critical path (this process's main thread and
    the server thread that steps the envs): time they were ready to run but had no core.
    """

    def __init__(self, server: psutil.Process | None = None):
        self._server = server
        self._client = psutil.Process()
        self._start: dict[str, float] = {}
        self._server_threads: dict[int, tuple[float, float]] = {}

    @staticmethod
    def _busy() -> float:
        times = psutil.cpu_times()
        # guest time is already part of user time, so it is not added again.
        return sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))

    def _sample(self) -> dict[str, float]:
        main = thread_schedstat(self._client.pid).get(self._client.pid, (0.0, 0.0))
        sample = {"wall": time.perf_counter(), "client": cpu_seconds(self._client), "busy": self._busy(),
                  "client_wait": main[1]}
        if self._server is not None:
            sample["server"] = cpu_seconds(self._server)
        return sample

    def start(self) -> None:
        if self._server is not None:
            self._server_threads = thread_schedstat(self._server.pid)
        self._start = self._sample()

    def stop(self) -> dict[str, float]:
        end = self._sample()
        delta = {name: end[name] - self._start[name] for name in end}
        wall = delta.pop("wall")
        other = delta["busy"] - delta["client"] - delta.get("server", 0.0)
        extra = {"client_cpu_util": delta["client"] / wall, "other_cpu_util": max(0.0, other / wall),
                 "client_runq_wait_util": delta["client_wait"] / wall}
        if self._server is not None:
            extra["server_cpu_util"] = delta["server"] / wall
            extra["server_runq_wait_util"] = busiest_thread_wait(
                self._server_threads, thread_schedstat(self._server.pid)) / wall
        return extra


# --- in-process paths -------------------------------------------------------------------------------
class LocalBatch:
    """N backend envs stepped one after another, with the server's seed sequence and autoreset."""

    def __init__(self, envs: int, seed: int):
        backend = CrafterBackend()
        self.envs = [backend.make_env() for _ in range(envs)]
        self._seed = seed
        self._episodes = [0] * envs
        self._steps = [0] * envs
        for i in range(envs):
            self._reset(i)

    def _reset(self, i: int) -> None:
        # Same episode seeds as Session._reset_slot, so both paths generate the same worlds.
        self.envs[i].reset(self._seed + i + self._episodes[i] * len(self.envs))
        self._episodes[i] += 1
        self._steps[i] = 0

    def step(self, actions: np.ndarray) -> None:
        for i, env in enumerate(self.envs):
            raw = env.step(int(actions[i]))
            self._steps[i] += 1
            if raw.dead or raw.backend_done or self._steps[i] >= EPISODE_LENGTH:
                self._reset(i)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def calibrate(envs: int, seed: int, target_seconds: float) -> Plan:
    """Sizes a plan from a timed warm-up of the in-process baseline."""
    warmup = max(3, math.ceil(WARMUP_FRAMES / envs))
    batch = LocalBatch(envs, seed)
    try:
        start = time.perf_counter()
        for row in action_rows(seed, envs, warmup):
            batch.step(row)
        rate = envs * warmup / (time.perf_counter() - start)
    finally:
        batch.close()
    steps = max(10, round(target_seconds * rate / envs))
    log.info("%d envs: warm-up %.0f frames/s -> %d warm-up + %d timed steps per path", envs, rate, warmup, steps)
    return Plan(envs, warmup, steps, action_rows(seed, envs, warmup + steps))


def in_process_memory(envs: int, seed: int) -> dict[str, float]:
    """RSS growth of this process from creating and resetting ``envs`` backend envs."""
    LocalBatch(1, seed).close()  # first-use costs (lazy imports, caches) stay out of the probe
    gc.collect()
    before = rss()
    batch = LocalBatch(envs, seed)
    after = rss()
    batch.close()
    del batch
    gc.collect()
    return {"envs": envs, "rss_before_mib": before / MIB, "rss_after_mib": after / MIB,
            "mib_per_env": (after - before) / MIB / envs}


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


class Runner:
    """One way of stepping a plan's envs. ``start`` builds its state and runs the untimed warm-up rows;
    ``run(lo, hi)`` steps rows ``lo..hi-1`` of the plan's actions, and is what gets timed."""

    path = ""
    label = ""

    def __init__(self, plan: Plan, seed: int, progress: Progress):
        self.plan = plan
        self.seed = seed
        self._progress = progress
        self.tracker: StepTracker | None = None
        self.server: psutil.Process | None = None
        self.handler_clock: Callable[[], float | None] | None = None

    def start(self) -> None:
        self.tracker = StepTracker(self._progress, f"{self.label} x{self.plan.envs}",
                                   self.plan.warmup + self.plan.steps)
        self.run(0, self.plan.warmup)

    def run(self, lo: int, hi: int) -> None:
        raise NotImplementedError

    def extra(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        if self.tracker is not None:
            self.tracker.done()

    def _advance(self) -> None:
        if self.tracker is not None:
            self.tracker.advance()


class InProcessRunner(Runner):
    """The baseline: backend envs stepped in a loop in this process, as the server steps them."""

    path, label = "in_process", "in-process envs"

    def start(self) -> None:
        self.batch = LocalBatch(self.plan.envs, self.seed)
        super().start()

    def run(self, lo: int, hi: int) -> None:
        for row in self.plan.actions[lo:hi]:
            self.batch.step(row)
            self._advance()

    def close(self) -> None:
        self.batch.close()
        super().close()


class RawCrafterRunner(Runner):
    """Plain ``crafter.Env`` (no wrapper, no vector, its own seeding) for reference."""

    path, label = "raw_crafter", "raw crafter.Env"

    def start(self) -> None:
        self.envs = [crafter.Env(seed=self.seed + i) for i in range(self.plan.envs)]
        for env in self.envs:
            env.reset()
        super().start()

    def run(self, lo: int, hi: int) -> None:
        for row in self.plan.actions[lo:hi]:
            for env, action in zip(self.envs, row, strict=True):
                _obs, _reward, done, _info = env.step(int(action))
                if done:
                    env.reset()
            self._advance()


class PipelineRunner(Runner):
    """The server's work per Step without transport: Session.step, response building, (de)serialization.

    Uses the servicer's private helpers on purpose: the point is to time exactly what ``Step`` runs.
    """

    path, label = "server_pipeline", "server work, no transport"

    def start(self) -> None:
        from services.env_server.servicer import EnvServicer

        self.servicer = EnvServicer(EnvServerSettings(max_envs_per_session=max(256, self.plan.envs)))
        self.session = self.servicer._build_session("bench", env_pb2.CreateSessionRequest(
            backend="crafter", seed=self.seed, num_envs=self.plan.envs, autoreset=True))
        self.parts = {"session_step_s": 0.0, "response_build_s": 0.0, "serialize_s": 0.0, "parse_s": 0.0}
        self._timing = False
        super().start()
        self._timing = True  # only rows after the warm-up count towards the breakdown

    def run(self, lo: int, hi: int) -> None:
        parts = self.parts
        for row in self.plan.actions[lo:hi]:
            t0 = time.perf_counter()
            outcome = self.session.step(row.tolist())
            t1 = time.perf_counter()
            response = self.servicer._step_response(self.session, outcome)
            t2 = time.perf_counter()
            data = response.SerializeToString()
            t3 = time.perf_counter()
            env_pb2.StepResponse.FromString(data)
            t4 = time.perf_counter()
            if self._timing:
                parts["session_step_s"] += t1 - t0
                parts["response_build_s"] += t2 - t1
                parts["serialize_s"] += t3 - t2
                parts["parse_s"] += t4 - t3
            self._advance()

    def extra(self) -> dict[str, float]:
        # One more step (all noop) just to report the wire size of a response.
        outcome = self.session.step([CrafterBackend.spec.noop_action] * self.plan.envs)
        size = len(self.servicer._step_response(self.session, outcome).SerializeToString())
        return {**self.parts, "response_bytes": float(size)}

    def close(self) -> None:
        self.session.close()
        self.servicer.close()
        super().close()


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


def measure_interleaved(runners: list[Runner], plan: Plan, rounds: int) -> list[Measurement]:
    """Times every runner over the same rows, interleaved in rounds.

    The machine is shared (2 cores here, other jobs running), so background load drifts; running the
    paths round-robin over slices of the rows exposes all of them to the same drift. The order rotates
    each round so no path always runs right after another particular one.
    """
    bounds = np.linspace(plan.warmup, plan.warmup + plan.steps, rounds + 1).round().astype(int)
    seconds = {r.path: 0.0 for r in runners}
    round_rates: dict[str, list[float]] = {r.path: [] for r in runners}
    cpu: dict[str, Counter[str]] = {r.path: Counter() for r in runners}
    handler: Counter[str] = Counter()
    for k in range(rounds):
        lo, hi = int(bounds[k]), int(bounds[k + 1])
        if hi <= lo:
            continue
        for j in range(len(runners)):
            runner = runners[(k + j) % len(runners)]
            window = CpuWindow(runner.server)
            clock_start = runner.handler_clock() if runner.handler_clock else None
            window.start()
            start = time.perf_counter()
            runner.run(lo, hi)
            elapsed = time.perf_counter() - start
            clock_end = runner.handler_clock() if runner.handler_clock else None
            if clock_start is not None and clock_end is not None:
                handler[runner.path] += clock_end - clock_start
            seconds[runner.path] += elapsed
            round_rates[runner.path].append(plan.envs * (hi - lo) / elapsed)
            for name, util in window.stop().items():
                cpu[runner.path][name] += util * elapsed  # CPU seconds, averaged below
    results = []
    for runner in runners:
        total = seconds[runner.path]
        extra = {name: cpu_s / total for name, cpu_s in cpu[runner.path].items()}
        if runner.path in handler:
            extra["server_handler_s"] = handler[runner.path]  # inside Step, the rest is transport
        extra.update(runner.extra())
        results.append(Measurement(runner.path, plan.envs, plan.warmup, plan.steps, total, extra,
                                   round_rates[runner.path]))
    return results


# --- profile ----------------------------------------------------------------------------------------
# Categories by priority: a sample belongs to the first category any of its frames matches, so
# e.g. World.__getitem__ called by the renderer counts as rendering, not as world update.
PROFILE_CATEGORIES: tuple[tuple[str, Callable[[str, str], bool]], ...] = (
    ("Crafter render (LocalView/ItemView, textures)",
     lambda func, file: (file.endswith("crafter/engine.py") and func.startswith(("LocalView", "ItemView", "_draw",
                                                                                   "Textures")))
     or (file.endswith("crafter/env.py") and func in ("Env.render", "Env._obs"))),
    ("Crafter semantic map (info['semantic'], unused)",
     lambda func, file: file.endswith("crafter/engine.py") and func.startswith("SemanticView")),
    ("Crafter reset (world generation)",
     lambda func, file: file.endswith("crafter/worldgen.py") or (file.endswith("crafter/env.py")
                                                                 and func == "Env.reset")),
    ("Crafter world update (objects, chunk balancing)",
     lambda func, file: ("crafter/" in file and not file.endswith("backends/crafter.py"))
     or func == "_DeterministicCrafter._balance_chunk"),
    ("Backend wrapper (vector, inventory, achievements)",
     lambda func, file: file.endswith("backends/crafter.py")),
    ("Prometheus metrics",
     lambda func, file: "prometheus_client" in file),
    ("Response building (np.stack, to_tensor, StepInfo messages)",
     lambda func, file: (file.endswith("env_server/servicer.py") and func.startswith(("EnvServicer._step_response",
                                                                                        "EnvServicer._observations")))
     or file.endswith("rlgpt/tensors.py") or (file.endswith("env_server/session.py")
                                              and func == "Session.observations")),
    ("Protobuf (de)serialization",
     lambda func, file: (file.endswith("grpc/_common.py") and func in ("serialize", "deserialize",
                                                                       "_transform"))
     or "upb" in func or "upb" in file or "protobuf" in file),
    ("Session bookkeeping (rewards, episodes, validation)",
     lambda func, file: file.endswith(("env_server/session.py", "env_server/tasks.py", "env_server/servicer.py",
                                       "rlgpt/errors.py"))),
    ("gRPC server machinery (Python + C-core)",
     lambda func, file: "grpc" in file or "grpc" in func),
    ("Thread-pool hand-off (concurrent.futures workers waking)",
     lambda func, file: file.endswith(("concurrent/futures/thread.py", "threading.py"))),
)
FRAME_RE = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def classify_stack(frames: list[str]) -> str:
    best = len(PROFILE_CATEGORIES)
    for frame in frames:
        match = FRAME_RE.match(frame)
        func, file = (match.group("func"), match.group("file")) if match else (frame, "")
        for index, (_name, rule) in enumerate(PROFILE_CATEGORIES[:best]):
            if rule(func, file):
                best = index
                break
    return PROFILE_CATEGORIES[best][0] if best < len(PROFILE_CATEGORIES) else "other (interpreter, threading)"


def summarise_collapsed(text: str) -> tuple[dict[str, float], int]:
    """Category shares of py-spy's collapsed stacks ("f1 (file:line);f2 (...) count" per line)."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, number = line.rpartition(" ")
        if not stack or not number.isdigit():
            continue
        counts[classify_stack(stack.split(";"))] += int(number)
    total = sum(counts.values())
    return ({name: count / total for name, count in counts.most_common()} if total else {}), total


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread name of a process (gRPC C-core threads are invisible to Python profilers)."""
    by_name: Counter[str] = Counter()
    for thread in psutil.Process(pid).threads():
        try:
            name = Path(f"/proc/{pid}/task/{thread.id}/comm").read_text().strip()
        except OSError:
            name = "?"
        # Pool threads are numbered (grpc_0, grpc_1...); group them.
        by_name[re.sub(r"[_-]?\d+$", "", name) or name] += thread.user_time + thread.system_time
    return dict(by_name)


def find_py_spy() -> str | None:
    candidate = Path(sys.executable).parent / "py-spy"
    return str(candidate) if candidate.exists() else shutil.which("py-spy")


class BackgroundStepper:
    """Steps a session with unary calls in a thread until stopped (load for the profiler)."""

    def __init__(self, stub: env_pb2_grpc.EnvServiceStub, session_id: str, plan: Plan):
        self._requests = step_requests(session_id, plan)
        self._stub = stub
        self._stop = threading.Event()
        self.steps = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-stepper")

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._stub.Step(self._requests[self.steps % len(self._requests)], timeout=120)
                self.steps += 1
        except grpc.RpcError as exc:
            self.error = exc

    def __enter__(self) -> BackgroundStepper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)


def profile_with_py_spy(py_spy: str, stub: env_pb2_grpc.EnvServiceStub, server: ServiceProcess, plan: Plan,
                        seed: int, seconds: int, keep_raw: Path | None = None) -> dict[str, Any]:
    session_id = create_session(stub, plan.envs, seed)
    result: dict[str, Any] = {"tool": "py-spy", "envs": plan.envs, "seconds": seconds}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "profile.txt"
            with BackgroundStepper(stub, session_id, plan) as stepper:
                time.sleep(1.0)  # let the stepper reach steady state first
                threads_before, steps_before, t0 = thread_cpu(server.process.pid), stepper.steps, time.perf_counter()
                # Python stacks only: --native cannot run --nonblocking (it would pause the server at every
                # sample) and counts threads waiting on locks or epoll as busy. C time (gRPC core, upb) is
                # charged to the Python frame that called it.
                for flags in (["--nonblocking"], []):
                    cmd = [py_spy, "record", "--pid", str(server.process.pid), "--duration", str(seconds),
                           "--rate", "250", "--format", "raw", "--output", str(out), *flags]
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=False)
                    if proc.returncode == 0 and out.exists() and out.stat().st_size:
                        result["py_spy_flags"] = flags
                        break
                    log.warning("py-spy %s failed (rc=%d): %s", " ".join(flags) or "(python only)",
                                proc.returncode, proc.stderr.strip()[-400:])
                wall = time.perf_counter() - t0
                threads_after, steps_after = thread_cpu(server.process.pid), stepper.steps
            if stepper.error is not None:
                raise RuntimeError(f"background stepping failed: {stepper.error}")
            if not (out.exists() and out.stat().st_size):
                raise RuntimeError("py-spy produced no profile")
            collapsed = out.read_text()
            shares, samples = summarise_collapsed(collapsed)
            if keep_raw is not None:
                keep_raw.write_text(collapsed)
    finally:
        close_session(stub, session_id)
    result.update(shares=shares, samples=samples,
                  frames_per_s_while_profiling=plan.envs * (steps_after - steps_before) / wall,
                  thread_cpu_util={name: (threads_after.get(name, 0.0) - before) / wall
                                   for name, before in threads_before.items()
                                   if threads_after.get(name, 0.0) - before > 0.005 * wall})
    return result


def profile_with_cprofile(plan: Plan, seed: int, seconds: int) -> dict[str, Any]:
    """Fallback without py-spy: an in-process server whose Step handler runs under cProfile.

    Only the handler is visible (not gRPC's own threads or serialization), so the shares are of
    handler time, and ``handler_share_of_wall`` says how much of the wall time that is.
    """
    from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
    from services.env_server.servicer import SERVICE_NAME, EnvServicer

    profiler = cProfile.Profile()

    class ProfiledServicer(EnvServicer):
        def Step(self, request: env_pb2.StepRequest, context: grpc.ServicerContext) -> env_pb2.StepResponse:
            profiler.enable()
            try:
                return super().Step(request, context)
            finally:
                profiler.disable()

    servicer = ProfiledServicer(EnvServerSettings(max_envs_per_session=max(256, plan.envs)))
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(SERVICE_NAME, env_pb2_grpc.add_EnvServiceServicer_to_server, servicer)], metrics_label="env")
    channel = create_channel(f"127.0.0.1:{port}", default_timeout=120, wait_ready_seconds=30)
    try:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        session_id = create_session(stub, plan.envs, seed)
        with BackgroundStepper(stub, session_id, plan) as stepper:
            time.sleep(seconds)
        wall = seconds
        steps = stepper.steps
        close_session(stub, session_id)
    finally:
        channel.close()
        stop_server(server, grace_seconds=1)
    stats = pstats.Stats(profiler)
    cumulative: Counter[str] = Counter()
    for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        cumulative[f"{Path(file).parent.name}/{Path(file).name}:{func}"] += ct

    def cum(*keys: str) -> float:
        return sum(cumulative.get(k, 0.0) for k in keys)

    handler = cum("env_server/servicer.py:Step")
    render = cum("crafter/env.py:render")
    crafter_step = cum("crafter/env.py:step")
    worldgen = cum("crafter/worldgen.py:generate_world")
    wrapper_step = cum("backends/crafter.py:step")
    session_step = cum("env_server/session.py:step")
    response = cum("env_server/servicer.py:_step_response")
    parts = {
        "Crafter render (LocalView/ItemView, textures)": render,
        "Crafter world update (objects, chunk balancing, semantic map)": max(0.0, crafter_step - render),
        "Crafter reset (world generation)": worldgen,
        "Backend wrapper (vector)": max(0.0, wrapper_step - crafter_step),
        "Session bookkeeping (rewards, episodes)": max(0.0, session_step - wrapper_step - worldgen),
        "Response building (np.stack, to_tensor, StepInfo messages)": response,
    }
    parts["rest of the handler (validation, metrics)"] = max(0.0, handler - sum(parts.values()))
    total = sum(parts.values()) or 1.0
    return {"tool": "cProfile", "envs": plan.envs, "seconds": seconds, "shares": {k: v / total for k, v in
                                                                                 parts.items()},
            "handler_share_of_wall": handler / wall, "frames_per_s_while_profiling": plan.envs * steps / wall}


# --- report -----------------------------------------------------------------------------------------
def machine_info(env_counts: list[int]) -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor() or "unknown"
    return {
        "cpu_model": model, "cpu_count": os.cpu_count(), "cpu_affinity": len(os.sched_getaffinity(0)),
        "ram_gib": round(psutil.virtual_memory().total / 1024**3, 1), "python": platform.python_version(),
        "platform": platform.platform(), "grpcio": grpc.__version__, "numpy": np.__version__,
        "protobuf": _version("protobuf"), "crafter": _version("crafter"), "envs": env_counts,
        "load_average": list(os.getloadavg()),
    }


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def fmt_rate(value: float | None) -> str:
    return f"{value:,.0f}" if value else "-"


def fmt_ratio(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


GRPC_PATHS = ("grpc_unary", "grpc_stream_lockstep", "grpc_stream_pipelined", "grpc_unary_pinned")


def outside_handler(measurement: dict[str, Any] | None) -> float | None:
    """Share of a gRPC path's wall time not spent inside the server's Step handler."""
    if not measurement or measurement["extra"].get("server_handler_s") is None or not measurement["seconds"]:
        return None
    return 1.0 - measurement["extra"]["server_handler_s"] / measurement["seconds"]


def uncontended_rate(measurement: dict[str, Any]) -> float:
    """frames/s with the time our processes sat runnable without a core taken out (an estimate).

    In lockstep the client and the server take turns on the critical path, so their waits add up.
    """
    extra = measurement["extra"]
    waiting = extra.get("client_runq_wait_util", 0.0) + extra.get("server_runq_wait_util", 0.0)
    return measurement["frames_per_s"] / max(0.05, 1.0 - waiting)


def ratios(results: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Per env count: ``path`` -> throughput ratio to in-process, ``path:adjusted`` -> the same with
    run-queue waits taken out, ``path:median_slice`` -> median of the per-slice ratios."""
    by: dict[int, dict[str, float]] = {}
    measurements = results["measurements"]
    for envs in results["machine"]["envs"]:
        base = measurements.get(f"in_process/{envs}")
        row: dict[str, float] = {}
        for path in (*GRPC_PATHS, "server_pipeline"):
            m = measurements.get(f"{path}/{envs}")
            if not (base and m and base["frames_per_s"]):
                continue
            row[path] = m["frames_per_s"] / base["frames_per_s"]
            row[f"{path}:adjusted"] = uncontended_rate(m) / uncontended_rate(base)
            paired = [r / b for r, b in zip(m["round_rates"], base["round_rates"], strict=False) if b]
            if paired:
                row[f"{path}:median_slice"] = float(np.median(paired))
        by[envs] = row
    return by


def render_section(results: dict[str, Any]) -> str:
    m = results["machine"]
    rates = results["rates"]
    rel = ratios(results)
    lines = [
        SECTION_TITLE, "",
        f"Measured {results['date_utc']} on {m['cpu_model']}, {m['cpu_count']} cores, {m['ram_gib']} GiB RAM, "
        f"Python {m['python']}, grpcio {m['grpcio']}, protobuf {m['protobuf']}, crafter {m['crafter']}; "
        f"envs per session: {', '.join(map(str, m['envs']))}; load average at start "
        f"{m['load_average'][0]:.2f}. Client and server share the machine.",
        "",
        "Every path replays the same seeds and the same pre-generated random actions for the same number of "
        f"steps (after a warm-up of about {WARMUP_FRAMES} frames), with autoreset on death, so each does the same "
        "Crafter work. *In-process* steps `CrafterBackend` envs one after another in this process, as the server "
        "does. *gRPC* talks to `rlgpt serve env` in a separate process over loopback: unary `Step`, and "
        "`StreamSteps` with the next request sent only after the previous response arrived (lockstep, as an "
        "actor that needs the observation). The timed steps are cut into "
        f"{results['settings']['rounds']} slices run round-robin across the paths, so drifting background "
        "load hits all paths alike. frames/s = envs x steps / seconds.",
        "",
        "| envs | in-process frames/s | gRPC unary frames/s | ratio | gRPC stream frames/s | ratio |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for envs in m["envs"]:
        lines.append(
            f"| {envs} | {fmt_rate(rates.get(f'in_process/{envs}'))} | {fmt_rate(rates.get(f'grpc_unary/{envs}'))} "
            f"| {fmt_ratio(rel[envs].get('grpc_unary'))} | {fmt_rate(rates.get(f'grpc_stream_lockstep/{envs}'))} "
            f"| {fmt_ratio(rel[envs].get('grpc_stream_lockstep'))} |")
    raw = [k for k in rates if k.startswith("raw_crafter/")]
    lines += [""]
    extras = []
    if raw:
        extras.append(f"Reference: plain `crafter.Env` (no wrapper) at 1 env: {fmt_rate(rates[raw[0]])} frames/s.")
    for path, title in (("grpc_stream_pipelined", "StreamSteps pipelined (each slice's requests offered at once)"),
                        ("grpc_unary_pinned", "Diagnostic, unary `Step` with every server thread pinned to one "
                                              "core during its slices")):
        if any(f"{path}/{envs}" in rates for envs in m["envs"]):
            extras.append(f"{title}: " + ", ".join(
                f"{envs} envs {fmt_rate(rates.get(f'{path}/{envs}'))} ({fmt_ratio(rel[envs].get(path))})"
                for envs in m["envs"]) + ".")
    if extras:
        lines += [" ".join(extras), ""]

    # Where the per-frame time goes, from the in-process replay of the server's Step work.
    lines += ["Where the time per frame goes, in microseconds per frame. *Server work* replays what `Step` runs "
              "(`Session.step` with its task bookkeeping, response building, `SerializeToString`) plus the "
              "client's parse, in one process without transport. *In handler* is the time the server itself spent "
              "inside `Step` during the gRPC unary run (its `rlgpt_env_step_seconds` histogram); *outside* is the "
              "share of the gRPC round trip spent elsewhere: transport, serialization in gRPC, thread hand-offs, "
              "the client.", "",
              "| envs | backend env only | Session.step (incl. env) | response build | serialize | parse "
              "| server work total | gRPC unary | of it in handler | outside handler, unary / stream |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for envs in m["envs"]:
        pipe = results["measurements"].get(f"server_pipeline/{envs}")
        unary_m = results["measurements"].get(f"grpc_unary/{envs}")
        base = rates.get(f"in_process/{envs}")
        if not (pipe and base and unary_m):
            continue
        frames = envs * pipe["steps"]
        extra = pipe["extra"]
        handler_s = unary_m["extra"].get("server_handler_s")
        handler = f"{1e6 * handler_s / frames:,.0f}" if handler_s is not None else "-"
        outside = " / ".join(fmt_ratio(outside_handler(results["measurements"].get(f"{path}/{envs}")))
                             for path in ("grpc_unary", "grpc_stream_lockstep"))
        lines.append(
            f"| {envs} | {1e6 / base:,.0f} | {1e6 * extra['session_step_s'] / frames:,.0f} "
            f"| {1e6 * extra['response_build_s'] / frames:,.1f} | {1e6 * extra['serialize_s'] / frames:,.1f} "
            f"| {1e6 * extra['parse_s'] / frames:,.1f} | {1e6 / pipe['frames_per_s']:,.0f} "
            f"| {1e6 / unary_m['frames_per_s']:,.0f} | {handler} | {outside} |")
    lines += ["", "CPU and contention while timed (cores; *others* = every other process on the machine; "
              "*waiting* = our processes runnable but without a core, from `/proc/*/schedstat`; the adjusted "
              "ratios take that waiting out of both sides and are an estimate for an otherwise idle machine; the "
              "slice median pairs each gRPC slice with the in-process slice of the same round):", "",
              "| envs | in-process CPU / waiting / others | unary server + client CPU / waiting / others "
              "| unary ratio adjusted | stream ratio adjusted | slice-median ratio unary / stream |",
              "|---:|---:|---:|---:|---:|---:|"]
    for envs in m["envs"]:
        local = results["measurements"].get(f"in_process/{envs}")
        unary_m = results["measurements"].get(f"grpc_unary/{envs}")
        if not (local and unary_m):
            continue
        lx, ux = local["extra"], unary_m["extra"]
        lines.append(
            f"| {envs} | {lx['client_cpu_util']:.2f} / {lx['client_runq_wait_util']:.2f} / {lx['other_cpu_util']:.2f} "
            f"| {ux['server_cpu_util']:.2f} + {ux['client_cpu_util']:.2f} / "
            f"{ux['server_runq_wait_util'] + ux['client_runq_wait_util']:.2f} / {ux['other_cpu_util']:.2f} "
            f"| {fmt_ratio(rel[envs].get('grpc_unary:adjusted'))} "
            f"| {fmt_ratio(rel[envs].get('grpc_stream_lockstep:adjusted'))} "
            f"| {fmt_ratio(rel[envs].get('grpc_unary:median_slice'))} / "
            f"{fmt_ratio(rel[envs].get('grpc_stream_lockstep:median_slice'))} |")

    mem = results.get("memory", {})
    if mem:
        server_mem, local_mem = mem.get("server", {}), mem.get("in_process", {})
        lines += ["", f"Memory per env ({server_mem.get('envs', '?')} envs, RSS after creating the session minus "
                  "before, / envs): server process "
                  f"{server_mem.get('mib_per_env', float('nan')):.2f} MiB/env; "
                  f"in-process {local_mem.get('mib_per_env', float('nan')):.2f} MiB/env."]

    prof = results.get("profile")
    if prof and prof.get("shares"):
        lines += ["", f"Where the server's time goes ({prof['envs']} envs, unary Step, {prof['tool']}"
                  + "".join(f" {flag}" for flag in prof.get("py_spy_flags", []))
                  + f", {prof['seconds']} s, {fmt_rate(prof['frames_per_s_while_profiling'])} frames/s while "
                  + ("sampled; shares of the samples of busy server threads, each sample charged to the most "
                     "specific part on its stack; C code such as gRPC core or upb counts under its Python caller):"
                     if prof["tool"] == "py-spy" else
                     f"profiled; shares of the Step handler's time, which was "
                     f"{prof.get('handler_share_of_wall', 0):.0%} of the wall time; gRPC's own threads and "
                     "serialization are not visible to cProfile here):"),
                  "",
                  "| part | share |", "|---|---:|"]
        for name, share in prof["shares"].items():
            if share >= 0.005:
                lines.append(f"| {name} | {share:.1%} |")
        threads = prof.get("thread_cpu_util")
        if threads:
            lines += ["", "Server CPU by thread over that window (100% = one core): "
                      + ", ".join(f"{name} {util:.0%}" for name, util in sorted(threads.items(),
                                                                               key=lambda kv: -kv[1])) + "."]
    lines += ["", reading(results), ""]
    return "\n".join(lines)


def reading(results: dict[str, Any]) -> str:
    """The plain-words reading of the numbers, written from them so reruns stay honest."""
    rel = ratios(results)
    measurements = results["measurements"]
    cores = results["machine"]["cpu_count"]
    big = [envs for envs in results["machine"]["envs"] if envs >= 16]
    if not big:
        return f"No session with 16+ envs was measured, so the {GOAL_RATIO:.0%} goal was not checked."

    def met(key: str) -> bool:
        return all(rel[e].get(key, 0.0) >= GOAL_RATIO for e in big)

    ratio_text = "; ".join(f"{e} envs: unary {fmt_ratio(rel[e].get('grpc_unary'))}, stream "
                           f"{fmt_ratio(rel[e].get('grpc_stream_lockstep'))}" for e in big)
    goal = f"the goal (>= {GOAL_RATIO:.0%} of in-process throughput through gRPC at 16+ envs)"
    if met("grpc_unary") and met("grpc_stream_lockstep"):
        verdict = f"**As measured, {goal} is met** ({ratio_text})."
    elif met("grpc_unary") or met("grpc_stream_lockstep"):
        verdict = (f"**As measured, {goal} is met only with "
                   f"{'unary Step' if met('grpc_unary') else 'StreamSteps'}** ({ratio_text}).")
    else:
        verdict = f"**As measured, {goal} is not met** ({ratio_text})."
    parts = [verdict]

    # What the server adds per frame, from the in-process replay of Step and the gRPC unary numbers.
    work, transport = [], []
    for e in big:
        base, pipe, unary = (measurements.get(f"{p}/{e}") for p in ("in_process", "server_pipeline", "grpc_unary"))
        if base and pipe and unary:
            base_us, pipe_us, unary_us = (1e6 / m["frames_per_s"] for m in (base, pipe, unary))
            work.append(pipe_us / base_us - 1)
            transport.append((unary_us - pipe_us) / base_us)
    outside = {path: [v for e in big if (v := outside_handler(measurements.get(f"{path}/{e}"))) is not None]
               for path in ("grpc_unary", "grpc_stream_lockstep")}
    if work:
        text = (f"Per frame, relative to the bare envs, the server's own work (task bookkeeping in `Session.step`, "
                f"building the response) adds about {np.mean(work):+.0%} (in-process replay of `Step`)")
        if outside["grpc_unary"]:
            text += (f"; of the gRPC round-trip time, {np.mean(outside['grpc_unary']):.0%} (unary) and "
                     f"{np.mean(outside['grpc_stream_lockstep'] or [float('nan')]):.0%} (stream) is spent outside "
                     "the server's Step handler (transport, thread hand-offs, the client)")
        else:
            text += f", and the gRPC unary round trip about {np.mean(transport):+.0%}"
        parts.append(text + ", averaged over 16+ envs.")

    pinned = [(e, rel[e].get("grpc_unary_pinned"), rel[e].get("grpc_unary")) for e in big
              if rel[e].get("grpc_unary_pinned") and rel[e].get("grpc_unary")]
    if pinned:
        gain = float(np.mean([p - u for _e, p, u in pinned]))
        text = ("With every server thread pinned to one core, unary reaches "
                + ", ".join(f"{fmt_ratio(p)} at {e} envs" for e, p, _u in pinned))
        if gain > 0.03:
            text += (f" ({gain:+.0%} points over the unpinned server): the gRPC sync server runs each call on "
                     "whichever pool thread is free and those threads hop between cores (`perf stat` on the 2-core "
                     "dev box counted about one CPU migration per call, plus GIL hand-offs with the poller "
                     "thread), so the envs' state is stepped with cold caches. Keeping the stepping on one "
                     "thread (and core) is the fix this points to.")
        else:
            text += (f" ({gain:+.0%} points over the unpinned server), so in this run thread migration made no "
                     "difference beyond the noise.")
        parts.append(text)
    others = [m["extra"].get("other_cpu_util", 0.0) for m in measurements.values() if "other_cpu_util" in m["extra"]]
    spread = [(max(m["round_rates"]) - min(m["round_rates"])) / m["frames_per_s"]
              for m in measurements.values() if len(m["round_rates"]) > 1 and m["frames_per_s"]]
    if others and np.mean(others) > 0.2:
        adjusted = "; ".join(f"{e} envs: unary {fmt_ratio(rel[e].get('grpc_unary:adjusted'))}, stream "
                             f"{fmt_ratio(rel[e].get('grpc_stream_lockstep:adjusted'))}" for e in big)
        adjusted_ok = met("grpc_unary:adjusted") and met("grpc_stream_lockstep:adjusted")
        parts.append(
            f"The run was not on a quiet machine: other processes used {np.mean(others):.1f} of the {cores} cores "
            f"on average while timing, and per-slice rates of one path varied by {np.median(spread):.0%} "
            "(median), which is as large as the margin being judged. The gRPC path needs more than one core "
            "(server, client, gRPC threads) and so suffers more from that load than the single-threaded "
            f"baseline. Taking out the time the critical-path threads sat runnable without a core gives {adjusted} "
            "(a rough estimate: it ignores cache effects), which "
            + ("meets the goal; only a rerun on a quiet machine can confirm it." if adjusted_ok else
               "misses the goal, so contention alone does not explain the gap; only a rerun on a quiet machine "
               "can settle it."))
    one = rel.get(1, {})
    if one.get("grpc_unary"):
        parts.append(f"At 1 env a call carries a single ~1.5 ms frame, so the fixed per-call cost dominates "
                     f"(unary {fmt_ratio(one.get('grpc_unary'))}, stream "
                     f"{fmt_ratio(one.get('grpc_stream_lockstep'))}); "
                     "putting many envs in one session is what amortises it.")
    shares = results.get("profile", {}).get("shares", {})
    if shares:
        crafter_share = sum(v for k, v in shares.items() if k.startswith(("Crafter", "Backend wrapper")))
        rest = [(k.split(" (")[0], v) for k, v in shares.items() if not k.startswith(("Crafter", "Backend wrapper"))]
        parts.append(f"Inside the server, Crafter itself takes {crafter_share:.0%} of the busy time (rendering "
                     f"alone {shares.get(PROFILE_CATEGORIES[0][0], 0.0):.0%}); the rest is "
                     + ", ".join(f"{name.lower()} {share:.0%}" for name, share in rest if share >= 0.005) + ".")
    return " ".join(parts)


def print_summary(results: dict[str, Any]) -> None:
    rel = ratios(results)
    rates = results["rates"]
    table = Table(title="Crafter frames/s")
    for column in ("envs", "in-process", "server work (no transport)", "gRPC unary", "ratio", "gRPC stream",
                   "ratio", "stream pipelined", "ratio", "unary, server pinned", "ratio"):
        table.add_column(column, justify="right")
    for envs in results["machine"]["envs"]:
        table.add_row(str(envs), fmt_rate(rates.get(f"in_process/{envs}")),
                      fmt_rate(rates.get(f"server_pipeline/{envs}")),
                      fmt_rate(rates.get(f"grpc_unary/{envs}")), fmt_ratio(rel[envs].get("grpc_unary")),
                      fmt_rate(rates.get(f"grpc_stream_lockstep/{envs}")),
                      fmt_ratio(rel[envs].get("grpc_stream_lockstep")),
                      fmt_rate(rates.get(f"grpc_stream_pipelined/{envs}")),
                      fmt_ratio(rel[envs].get("grpc_stream_pipelined")),
                      fmt_rate(rates.get(f"grpc_unary_pinned/{envs}")),
                      fmt_ratio(rel[envs].get("grpc_unary_pinned")))
    Console().print(table)


# --- main -------------------------------------------------------------------------------------------
def run_benchmark(env_counts: list[int], seconds: float, rounds: int, seed: int, profile_envs: int,
                  profile_seconds: int, profiler: str, raw_dir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine_info(env_counts),
        "settings": {"seconds": seconds, "rounds": rounds, "seed": seed, "warmup_frames": WARMUP_FRAMES},
        "measurements": {}, "rates": {}, "memory": {},
    }
    if results["machine"]["load_average"][0] > 0.5:
        log.warning("load average %.2f before the start: other processes share these %d cores and will skew "
                    "the numbers", results["machine"]["load_average"][0], results["machine"]["cpu_count"])

    def record(measurement: Measurement) -> None:
        key = f"{measurement.path}/{measurement.envs}"
        results["measurements"][key] = measurement.as_dict()
        results["rates"][key] = measurement.frames_per_s
        log.info("%-24s %3d envs: %8.0f frames/s (%d steps in %.1f s; other processes %.0f%% CPU)",
                 measurement.path, measurement.envs, measurement.frames_per_s, measurement.steps,
                 measurement.seconds, 100 * measurement.extra.get("other_cpu_util", 0.0))

    memory_envs = max(env_counts)
    # Largest first, so the memory probes see processes that have not yet freed (and could reuse) env memory.
    order = sorted(env_counts, reverse=True)
    plans: dict[int, Plan] = {}
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, transient=True)
    server: ServiceProcess | None = None
    with progress:
        try:
            results["memory"]["in_process"] = in_process_memory(memory_envs, seed)
            server = start_server(max(256, memory_envs), raw_dir)
            channel = create_channel(f"127.0.0.1:{server.port}", default_timeout=120, wait_ready_seconds=30)
            try:
                stub = env_pb2_grpc.EnvServiceStub(channel)
                close_session(stub, create_session(stub, 1, seed))  # first-use costs stay out of the memory probe
                for envs in order:
                    plan = plans[envs] = calibrate(envs, seed, seconds)
                    # Every runner gets a fresh state from the same seed: the same worlds, the same work.
                    unary = UnaryRunner(plan, seed, progress, stub, server)
                    runners: list[Runner] = [
                        InProcessRunner(plan, seed, progress), PipelineRunner(plan, seed, progress), unary,
                        StreamRunner(plan, seed, progress, stub, server, lockstep=True),
                        StreamRunner(plan, seed, progress, stub, server, lockstep=False)]
                    if len(os.sched_getaffinity(0)) > 1 and sys.platform == "linux":
                        runners.append(PinnedUnaryRunner(plan, seed, progress, stub, server))
                    if envs == 1:
                        runners.append(RawCrafterRunner(plan, seed, progress))
                    started: list[Runner] = []
                    try:
                        for runner in runners:
                            runner.start()
                            started.append(runner)
                        for measurement in measure_interleaved(runners, plan, rounds):
                            record(measurement)
                        if envs == memory_envs:
                            # The unary session was the first real one this server created.
                            results["memory"]["server"] = {
                                "envs": envs, "rss_before_mib": unary.rss_before / MIB,
                                "rss_after_mib": unary.rss_after / MIB,
                                "mib_per_env": (unary.rss_after - unary.rss_before) / MIB / envs}
                    finally:
                        for runner in started:
                            runner.close()
                if profile_envs:
                    plan = plans.get(profile_envs) or calibrate(profile_envs, seed, seconds)
                    results["profile"] = run_profile(profiler, stub, server, plan, seed, profile_seconds, raw_dir)
            finally:
                channel.close()
        finally:
            if server is not None:
                server.stop(grace_seconds=15)
    results["machine"]["load_average_end"] = list(os.getloadavg())
    return results


def run_profile(profiler: str, stub: env_pb2_grpc.EnvServiceStub, server: ServiceProcess, plan: Plan, seed: int,
                seconds: int, raw_dir: Path) -> dict[str, Any]:
    """py-spy on the server process when available, else cProfile on an in-process server."""
    py_spy = find_py_spy() if profiler == "auto" else None
    if py_spy:
        log.info("profiling the server (%d envs, unary Step) with %s for %d s", plan.envs, py_spy, seconds)
        try:
            return profile_with_py_spy(py_spy, stub, server, plan, seed, seconds, raw_dir / "env-profile.txt")
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            log.warning("py-spy profile failed (%s); falling back to cProfile", exc)
    elif profiler == "auto":
        log.warning("py-spy not found (pip install py-spy); falling back to cProfile")
    log.info("profiling an in-process server (%d envs, unary Step) with cProfile for %d s", plan.envs, seconds)
    return profile_with_cprofile(plan, seed, seconds)


def parse_counts(text: str) -> list[int]:
    counts = sorted({int(part) for part in text.split(",") if part.strip()})
    if not counts or counts[0] < 1:
        raise typer.BadParameter("env counts must be positive integers, e.g. 1,16,64")
    return counts


def main(
    output: Annotated[Path, typer.Option(help="Markdown file whose env-server section is replaced.")] = Path(
        "docs/BENCHMARKS.md"),
    raw_json: Annotated[Path, typer.Option(help="Where the raw results go (JSON).")] = Path("docs/bench-raw/env.json"),
    envs: Annotated[str, typer.Option(help="Comma-separated env counts per session.")] = "1,16,64",
    seconds: Annotated[float, typer.Option(help="Target seconds per timed measurement.", min=0.5)] = 6.0,
    rounds: Annotated[int, typer.Option(help="Slices each measurement is cut into, interleaved across paths.",
                                        min=1)] = 8,
    seed: Annotated[int, typer.Option(help="Base seed of worlds and actions.")] = 0,
    profile_envs: Annotated[int, typer.Option(help="Env count of the profiled run; 0 skips profiling.")] = 16,
    profile_seconds: Annotated[int, typer.Option(help="Seconds of profiling.", min=1)] = 8,
    profiler: Annotated[str, typer.Option(help="'auto': py-spy when installed, else cProfile; 'cprofile'.")] = "auto",
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Measure Crafter frames/s in-process and through the env server; write docs/BENCHMARKS.md."""
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(message)s",
                        handlers=[RichHandler(console=console, show_path=False)])
    if profiler not in ("auto", "cprofile"):
        raise typer.BadParameter("--profiler must be 'auto' or 'cprofile'")
    counts = parse_counts(envs)
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the finally blocks stop the server.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    raw_json.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results = run_benchmark(counts, seconds, rounds, seed, profile_envs, profile_seconds, profiler,
                            raw_json.parent)
    results["total_seconds"] = time.perf_counter() - started
    raw_json.write_text(json.dumps(results, indent=2) + "\n")
    write_section(output, SECTION_TITLE, render_section(results))
    print_summary(results)
    log.info("wrote %s and %s in %.0f s", output, raw_json, results["total_seconds"])


if __name__ == "__main__":
    typer.run(main)
