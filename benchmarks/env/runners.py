"""The ways bench-env steps a plan's envs (in-process, raw Crafter, the server's work without transport) and
the interleaved timing of all of them over the same rows."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import crafter
import numpy as np
import psutil
from rich.progress import Progress

from benchmarks.env.measure import CpuWindow, LocalBatch, Measurement, Plan
from rlgpt.v1 import env_pb2
from services.env_server.backends.crafter import CrafterBackend
from services.env_server.settings import EnvServerSettings


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

