"""What bench-env measures with: the per-path result, the plan every path replays, the in-process batch of
backend envs, and the CPU and run-queue accounting of a timed window."""

from __future__ import annotations

import dataclasses
import gc
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.common import MIB
from services.env_server.backends.crafter import CrafterBackend

log = logging.getLogger("benchmarks.env")

NUM_ACTIONS = len(CrafterBackend.spec.actions)
EPISODE_LENGTH = CrafterBackend.spec.default_episode_length
WARMUP_FRAMES = 400  # about 0.4 s of stepping: first renders fill texture caches, HTTP/2 windows grow


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

