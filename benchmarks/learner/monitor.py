"""Watching the shared machine during bench-learner's timed windows: peak memory and CPU of our process
trees and of everyone else, waiting for a quiet machine, and redoing windows other processes disturbed."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from benchmarks.common import MIB

log = logging.getLogger("benchmarks.learner")

HEAVY_NAMES = {"pip", "pip3", "cmake", "cc1", "cc1plus", "pytest", "make", "ninja", "ld", "as", "gcc", "g++",
               "c++", "cargo", "rustc"}


def _tree_pids(root: psutil.Process) -> set[int]:
    try:
        return {root.pid} | {child.pid for child in root.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def ours_and_callers() -> set[int]:
    """This benchmark's process tree and the processes that started it: a ``make bench-learner`` (or a shell)
    waiting for this process is not background work, and must not make it wait for itself."""
    me = psutil.Process()
    return _tree_pids(me) | {parent.pid for parent in me.parents()}


def _busy_seconds() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


class Monitor:
    """Polls during a timed window: peak RSS of watched process trees and the CPU of every process.

    CPU per process is the cpu_times delta over the window (what summing psutil's cpu_percent gives), split
    into this benchmark's process tree (this process and all its descendants: the training job and the env
    server) and everything else. Short-lived processes that start and end between two polls (a compiler
    job, say) escape the per-process sum, so the machine-wide busy time minus ours is recorded as well.
    """

    def __init__(self, interval: float = 0.5, cpu_every: int = 2, pss_every: int = 6):
        self._interval = interval
        self._cpu_every = cpu_every
        self._pss_every = pss_every
        self._me = psutil.Process()
        self._trees: dict[str, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-monitor")
        self._lock = threading.Lock()
        self.peak_rss: Counter[str] = Counter()
        self.peak_pss: Counter[str] = Counter()
        self._first: dict[tuple[int, float], float] = {}
        self._last: dict[tuple[int, float], float] = {}
        self._names: dict[tuple[int, float], str] = {}
        self._ours: set[tuple[int, float]] = set()
        self._tree_keys: dict[str, set[tuple[int, float]]] = {}
        self._t0 = self._t_wall0 = self._busy0 = 0.0
        self._ticks = 0
        self.wall = self.busy = 0.0
        self.series: list[tuple[float, dict[str, float]]] = []

    def watch(self, name: str, pid: int) -> None:
        """Adds a process tree whose summed RSS (and CPU) is tracked from now on."""
        with self._lock:
            self._trees[name] = psutil.Process(pid)
            self._tree_keys.setdefault(name, set())

    def _scan_cpu(self) -> None:
        ours = _tree_pids(self._me)
        tree_pids = {name: _tree_pids(proc) for name, proc in self._trees.items()}
        for proc in psutil.process_iter(["pid", "name", "create_time", "cpu_times"]):
            info = proc.info
            if info["cpu_times"] is None or info["create_time"] is None:
                continue
            key = (info["pid"], info["create_time"])
            cpu = info["cpu_times"].user + info["cpu_times"].system
            if key not in self._first:
                # Started during the window: all its CPU counts; seen at the start: only the delta.
                self._first[key] = 0.0 if self._ticks and info["create_time"] >= self._t_wall0 else cpu
                self._names[key] = info["name"] or "?"
            self._last[key] = cpu
            if info["pid"] in ours:
                self._ours.add(key)
            for name, pids in tree_pids.items():
                if info["pid"] in pids:
                    self._tree_keys[name].add(key)
        # Cumulative CPU seconds so far, so a sub-window (the steady second half of a run) can be cut out later.
        others = set(self._first) - self._ours
        self.series.append((time.time(), {"others": self._used(others), "ours": self._used(self._ours),
                                          **{name: self._used(keys) for name, keys in self._tree_keys.items()}}))

    def _used(self, keys: set[tuple[int, float]]) -> float:
        return sum(max(0.0, self._last[k] - self._first[k]) for k in keys)

    def util_between(self, t1: float, t2: float) -> dict[str, float]:
        """CPU use (cores) per tracked group between two wall-clock times, from the nearest samples."""
        if len(self.series) < 2 or t2 <= t1:
            return {}
        a = min(self.series, key=lambda sample: abs(sample[0] - t1))
        b = min(self.series, key=lambda sample: abs(sample[0] - t2))
        if b[0] <= a[0]:
            return {}
        return {name: (b[1].get(name, 0.0) - a[1].get(name, 0.0)) / (b[0] - a[0]) for name in b[1]}

    def _scan_memory(self, with_pss: bool) -> None:
        for name, root in list(self._trees.items()):
            rss = pss = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in procs:
                try:
                    if with_pss:
                        full = proc.memory_full_info()
                        rss, pss = rss + full.rss, pss + full.pss
                    else:
                        rss += proc.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self.peak_rss[name] = max(self.peak_rss[name], rss)
            if with_pss:
                self.peak_pss[name] = max(self.peak_pss[name], pss)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._ticks += 1
            with self._lock:
                self._scan_memory(with_pss=self._ticks % self._pss_every == 0)
                if self._ticks % self._cpu_every == 0:
                    self._scan_cpu()

    def __enter__(self) -> Monitor:
        self._t0, self._t_wall0, self._busy0 = time.perf_counter(), time.time(), _busy_seconds()
        with self._lock:
            self._scan_cpu()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        with self._lock:
            self._scan_cpu()
            self._scan_memory(with_pss=True)
        self.wall = time.perf_counter() - self._t0
        self.busy = _busy_seconds() - self._busy0

    def result(self) -> dict[str, Any]:
        wall = max(self.wall, 1e-9)
        used = self._used
        others = set(self._first) - self._ours
        by_name: Counter[str] = Counter()
        for key in others:
            by_name[self._names[key]] += max(0.0, self._last[key] - self._first[key]) / wall
        ours_cpu = used(self._ours)
        return {
            "window_s": self.wall,
            "others_cpu_util": used(others) / wall,
            "others_cpu_util_machine_wide": max(0.0, self.busy - ours_cpu) / wall,
            "ours_cpu_util": ours_cpu / wall,
            "tree_cpu_util": {name: used(keys) / wall for name, keys in self._tree_keys.items()},
            "top_others": {name: round(util, 3) for name, util in by_name.most_common(5) if util >= 0.005},
            "peak_rss_mib": {name: value / MIB for name, value in self.peak_rss.items()},
            "peak_pss_mib": {name: value / MIB for name, value in self.peak_pss.items()},
        }


def _heavy_reason(proc: psutil.Process, ours: set[int]) -> str:
    """Why a process counts as heavy background work (a build, an install, a test run), or ''."""
    if proc.pid in ours:
        return ""
    try:
        name = proc.name()
        cmdline = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""
    if name in HEAVY_NAMES:
        return name
    words = [Path(word).name for word in cmdline[:4]]
    for heavy in ("pip", "pip3", "pytest", "cmake"):
        if heavy in words or any(w == "-m" and i + 1 < len(words) and words[i + 1] == heavy
                                 for i, w in enumerate(words)):
            return heavy
    return ""


def sample_others(seconds: float) -> float:
    """CPU (in cores) that processes outside this benchmark's tree used over ``seconds``."""
    with Monitor(interval=seconds / 2, cpu_every=1, pss_every=10**9) as monitor:
        time.sleep(seconds)
    return float(monitor.result()["others_cpu_util"])


def wait_until_quiet(limit: float, max_load: float, timeout: float) -> dict[str, Any]:
    """Waits until no heavy process runs, others use < ``limit`` cores and the 1-min load is < ``max_load``.

    The load average lags (a minute's time constant), so it only gets a short extra wait once everything
    else is quiet; heavy processes and others' CPU are what matter for the measurement.
    """
    start = time.monotonic()
    last_note = 0.0
    quiet_since: float | None = None
    while True:
        ours = ours_and_callers()
        heavy = sorted({r for p in psutil.process_iter() if (r := _heavy_reason(p, ours))})
        others = sample_others(2.0)
        load1 = os.getloadavg()[0]
        now = time.monotonic()
        if heavy or others >= limit:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        # Once quiet, give the load average up to 60 s to come down (it trails our own previous window).
        if quiet_since is not None and (load1 < max_load or now - quiet_since >= 60):
            waited = now - start
            if waited > 5:
                log.info("machine quiet after %.0f s (load %.2f, others %.0f%% of a core)", waited, load1,
                         100 * others)
            return {"waited_s": waited, "load_average": list(os.getloadavg()), "others_before": others,
                    "heavy_before": heavy}
        if now - start >= timeout:
            log.warning("machine still busy after %.0f s (heavy: %s, others %.0f%% of a core, load %.2f); "
                        "measuring anyway", timeout, ", ".join(heavy) or "none", 100 * others, load1)
            return {"waited_s": now - start, "load_average": list(os.getloadavg()), "others_before": others,
                    "heavy_before": heavy, "gave_up_waiting": True}
        if now - last_note >= 30:
            log.info("waiting for a quiet machine: heavy processes: %s; others %.0f%% of a core; load %.2f",
                     ", ".join(heavy) or "none", 100 * others, load1)
            last_note = now
        time.sleep(3.0)



@dataclasses.dataclass
class Guard:
    """Waits for a quiet machine before each window and redoes windows other processes disturbed."""

    max_others: float
    redo: int
    max_load: float
    quiet_timeout: float

    def measure(self, label: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        attempts: list[dict[str, Any]] = []
        for attempt in range(1 + self.redo):
            quiet = wait_until_quiet(self.max_others, self.max_load, self.quiet_timeout)
            result = run()
            result.update(attempt=attempt + 1, load_average_start=quiet["load_average"], quiet_wait=quiet)
            attempts.append(result)
            others = result.get("others_cpu_util", 0.0)
            log.info("%s (attempt %d): others used %.0f%% of a core (machine-wide minus ours: %.0f%%)%s", label,
                     attempt + 1, 100 * others, 100 * result.get("others_cpu_util_machine_wide", 0.0),
                     f"; top: {result.get('top_others')}" if result.get("top_others") else "")
            if others <= self.max_others:
                break
            if attempt < self.redo:
                log.warning("%s: other processes used %.0f%% of a core (> %.0f%%); redoing the window", label,
                            100 * others, 100 * self.max_others)
        best = min(attempts, key=lambda r: r.get("others_cpu_util", 0.0))
        best["attempts"] = [{k: a.get(k) for k in ("attempt", "others_cpu_util", "others_cpu_util_machine_wide",
                                                   "top_others", "frames_per_s", "fps_second_half",
                                                   "load_average_start")} for a in attempts]
        best["disturbed"] = best.get("others_cpu_util", 0.0) > self.max_others
        return best

