"""Learner training throughput: Sample Factory APPO on Crafter with the env in-process vs. through the env server.

``make bench-learner`` runs ``python -m benchmarks.bench_learner --output docs/BENCHMARKS.md``. It measures, on
the Crafter task collect_wood with primitive actions only (so frames == decisions):

1. raw Crafter stepping with random actions, one process and two processes (one per core);
2. APPO training with the env *in-process*: a Sample Factory env (``rlgpt_inprocess``) over a local
   ``Session``, trained through the same code as ``services.learner.train`` (sf_argv, parse_cfg,
   ProgressObserver) in a subprocess (``--worker inprocess --job-dir JOB_DIR``);
3. APPO training *through the env server*: ``rlgpt serve env`` plus ``python -m services.learner.train``,
   exactly as the learner service launches a job.

Training FPS is read from the job's ``progress.jsonl``; peak RSS is polled over each process tree. The
machine is shared, so before every timed window the benchmark waits for it to be quiet and records the CPU
that other processes used during the window, redoing a window that others disturbed. Results go into one
section of the markdown file (other sections are kept) and, raw, into ``docs/bench-raw/learner.json``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import json
import logging
import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import psutil
import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from benchmarks import bench_env
from benchmarks.bench_env import MIB, REPO_ROOT, fmt_rate, fmt_ratio, machine_info
from benchmarks.common import write_section
from rlgpt.config import EnvServerSettings
from rlgpt.env_client import EnvStep, SessionEnv
from rlgpt.launcher import ServiceProcess, start_service
from rlgpt.v1 import common_pb2, learner_pb2
from services.env_server.backends.base import get_backend
from services.env_server.backends.crafter import CrafterBackend
from services.env_server.session import Action, Session
from services.env_server.tasks import parse_reward_terms, parse_task
from services.learner.jobs import read_progress, train_command, write_job_config
from services.learner.sf_env import learning_env, load_job_config, slot_seed

log = logging.getLogger("benchmarks.bench_learner")
console = Console(stderr=True)

SECTION_TITLE = "## Learner training throughput (make bench-learner)"
GOAL_RATIO = 0.70
INPROCESS_ENV_NAME = "rlgpt_inprocess"
NUM_WORKERS = 2
ENVS_PER_WORKER = 4
EPISODE_LENGTH = 1000  # RLConfig's default once validated; the learner service fills it in the same way
WARMUP_FRAMES = 400  # per raw-stepping process: first renders fill Crafter's texture caches
HEAVY_NAMES = {"pip", "pip3", "cmake", "cc1", "cc1plus", "pytest", "make", "ninja", "ld", "as", "gcc", "g++",
               "c++", "cargo", "rustc"}
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
LOG_PREFIX_RE = re.compile(r"^\[[^\]]*\]\[\s*\d+\]\s*")
TREE_START_RE = re.compile(r"(?P<name>\S.*?) profile tree view:\s*$")
TREE_ITEM_RE = re.compile(r"^(?P<key>[\w\-. ]+?): (?P<value>[-+0-9.eE]+)$")
SF_FPS_RE = re.compile(r"Collected \{(?P<steps>[^}]*)\}, FPS: (?P<fps>[0-9.]+)")


# --- the in-process Sample Factory env --------------------------------------------------------------
class LocalSession:
    """One env of a local ``Session``, as ``rlgpt.env_client.SessionEnv`` steps it (``OneEnv``).

    The session is built the way the env server builds one for ``CreateSession`` (same task and reward
    parsing, autoreset off, reset through ``Session.reset``) and stepped through the learner's own env
    (``learning_env``), so the only difference to the env-server path is the missing gRPC hop.
    """

    def __init__(self, config: learner_pb2.RLConfig, seed: int):
        if config.skills:
            raise ValueError("the in-process benchmark env takes primitive actions only (no skills)")
        backend = get_backend(config.backend)
        spec = backend.spec
        settings = EnvServerSettings()
        self.actions = list(config.primitive_actions) or list(spec.actions)
        self.image_shape = tuple(spec.image_shape)
        self.vector_shape = (len(spec.vector_labels),)
        self._session = Session(
            session_id=f"inprocess-{seed}", backend=backend, task=parse_task(config.task, spec),
            reward_terms=parse_reward_terms(list(config.reward_terms), spec), seed=seed, num_envs=1,
            episode_length=config.episode_length or spec.default_episode_length,
            actions=[Action(name=name, primitive=spec.actions.index(name)) for name in self.actions],
            skill_max_steps=config.skill_max_steps or settings.default_skill_steps, autoreset=False,
            settings=settings, client="bench-learner")

    def initial_observation(self) -> dict[str, np.ndarray]:
        images, vectors = self._session.observations([0])
        return {"image": images[0], "vector": vectors[0]}

    def reset_env(self, seed: int = 0) -> dict[str, np.ndarray]:
        self._session.reset([0], seed)
        return self.initial_observation()

    def step_env(self, action: int) -> EnvStep:
        out = self._session.step([action])
        info = out.infos[0]
        return EnvStep(observation=self.initial_observation(), reward=float(out.rewards[0]),
                       terminated=bool(out.terminated[0]), truncated=bool(out.truncated[0]),
                       frames=int(out.frames[0]), success=info["success"], achievements=info["achievements"],
                       episode_steps=info["episode_steps"], skill_finished=info.get("skill_finished", False),
                       skill_error=info.get("skill_error"))

    def close(self) -> None:
        self._session.close()


def make_inprocess_env(full_env_name: str, cfg: Any = None, env_config: Any = None,
                       render_mode: str | None = None) -> SessionEnv:
    """Sample Factory's env factory, with ``make_sf_env``'s per-slot seeds and env."""
    config, _doc = load_job_config(Path(cfg.rlgpt_job_dir))
    return learning_env(LocalSession(config, slot_seed(config, env_config)))


def run_inprocess_job(job_dir: Path) -> int:
    """``services.learner.train.run_job`` with the env swapped for the in-process one."""
    from sample_factory.envs.env_utils import register_env

    from services.learner.train import register_components, run_job

    # Register the factory from the importable module, not from __main__: Sample Factory pickles its env
    # registry into spawned worker processes, which must be able to import the function by name.
    module = importlib.import_module("benchmarks.bench_learner")
    register_components()
    register_env(INPROCESS_ENV_NAME, module.make_inprocess_env)
    return run_job(job_dir, env_name=INPROCESS_ENV_NAME)


# --- watching the machine ---------------------------------------------------------------------------
def _tree_pids(root: psutil.Process) -> set[int]:
    try:
        return {root.pid} | {child.pid for child in root.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


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
        ours = _tree_pids(psutil.Process())
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


# --- raw stepping -----------------------------------------------------------------------------------
def _raw_stepper(index: int, envs: int, seed: int, seconds: float, barrier: Any, results: Any) -> None:
    """One process: ``envs`` CrafterBackend envs stepped with random actions for ``seconds`` (a spawn target)."""
    backend = CrafterBackend()
    batch = [backend.make_env() for _ in range(envs)]
    rng = np.random.default_rng([seed, index])
    num_actions = len(backend.spec.actions)
    steps = [0] * envs
    episodes = [0] * envs

    def reset(i: int) -> None:
        # Session._reset_slot's seed sequence, so worlds match what a session of this seed generates.
        batch[i].reset(seed + i + episodes[i] * envs)
        episodes[i] += 1
        steps[i] = 0

    def step_all() -> None:
        for i, env in enumerate(batch):
            raw = env.step(int(rng.integers(num_actions)))
            steps[i] += 1
            if raw.dead or raw.backend_done or steps[i] >= EPISODE_LENGTH:
                reset(i)

    for i in range(envs):
        reset(i)
    for _ in range(max(1, WARMUP_FRAMES // envs)):
        step_all()
    barrier.wait()  # all processes start timing together
    process = psutil.Process()
    cpu0 = sum(process.cpu_times()[:2])
    start = time.perf_counter()
    frames = 0
    while time.perf_counter() - start < seconds:
        step_all()
        frames += envs
    elapsed = time.perf_counter() - start
    results.put({"index": index, "frames": frames, "seconds": elapsed,
                 "cpu_util": (sum(process.cpu_times()[:2]) - cpu0) / elapsed})


def measure_raw(processes: int, envs: int, seed: int, seconds: float, progress: Progress) -> dict[str, Any]:
    """Raw Crafter frames/s summed over ``processes`` stepping processes."""
    ctx = mp.get_context("spawn")  # fresh interpreters: nothing inherited from this process's threads
    barrier = ctx.Barrier(processes + 1)
    queue = ctx.Queue()
    workers = [ctx.Process(target=_raw_stepper, args=(i, envs, seed + 7919 * i, seconds, barrier, queue),
                           daemon=True) for i in range(processes)]
    task = progress.add_task(f"raw stepping, {processes} process(es)", total=seconds)
    try:
        for worker in workers:
            worker.start()
        barrier.wait(timeout=120)  # every process has built and warmed up its envs
        with Monitor() as monitor:
            start = time.perf_counter()
            while any(w.is_alive() for w in workers) and time.perf_counter() - start < seconds + 60:
                progress.update(task, completed=min(seconds, time.perf_counter() - start))
                if queue.qsize() >= processes:
                    break
                time.sleep(0.2)
            parts = [queue.get(timeout=60) for _ in range(processes)]
    finally:
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.kill()
                worker.join()
        progress.update(task, visible=False)
    parts.sort(key=lambda p: p["index"])
    fps = sum(p["frames"] / p["seconds"] for p in parts)
    cpu = sum(p["cpu_util"] for p in parts)
    return {"processes": processes, "envs_per_process": envs, "frames_per_s": fps, "parts": parts,
            "cpu_ms_per_frame": 1000 * cpu / fps if fps else None, **monitor.result()}


# --- training runs ----------------------------------------------------------------------------------
def rl_config(frames: int, seed: int) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(
        name="bench-wood", backend="crafter", task=common_pb2.TaskSpec(name="collect_wood"),
        reward_terms=[common_pb2.RewardTerm(kind="success", weight=1.0),
                      common_pb2.RewardTerm(kind="inventory_gain", target="wood", weight=0.1)],
        episode_length=EPISODE_LENGTH, env_frames=frames, num_workers=NUM_WORKERS,
        envs_per_worker=ENVS_PER_WORKER, seed=seed, skill_max_steps=1)


def kill_group(process: subprocess.Popen[Any]) -> None:
    """Ends a subprocess started in its own session and everything it spawned (SF workers included)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        log.error("pid %d survived SIGKILL", process.pid)


def fps_readout(records: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    """Training frames/s from progress records: steady state over the second half of the frames, and overall."""
    moving = [r for r in records if r["env_frames"] > 0]
    if not records or len(moving) < 2:
        return {"records": len(records)}
    last = records[-1]
    frames = last["env_frames"]
    half = [r for r in records if r["env_frames"] >= frames / 2]
    first = half[0] if len(half) >= 2 else moving[0]
    span = last["elapsed"] - first["elapsed"]
    second_half = (last["env_frames"] - first["env_frames"]) / span if span > 0 else 0.0
    interior = [r["fps"] for r in half if not r.get("final")] or [r["fps"] for r in half]
    return {
        "records": len(records), "env_frames": frames, "episodes": last.get("episodes", 0),
        "fps_second_half": second_half, "second_half_window_s": span,
        "second_half_times": [first["time"], last["time"]],
        # ProgressObserver's own fps is a rolling rate over its last 30 records (about a minute).
        "fps_records_mean_second_half": sum(interior) / len(interior),
        "fps_overall_wall": frames / wall if wall > 0 else 0.0,
        "fps_overall_training": frames / last["elapsed"] if last["elapsed"] > 0 else 0.0,
        "first_frames_after_s": moving[0]["elapsed"], "observer_elapsed_s": last["elapsed"],
        "mean_return": last.get("mean_return", 0.0), "success_rate": last.get("success_rate", 0.0),
        "policy_lag": last.get("policy_lag", 0.0), "reason": last.get("reason", ""),
    }


def parse_sf_profiles(text: str) -> dict[str, Any]:
    """Sample Factory's end-of-run profile trees (one per component) and its own FPS line, from the log."""
    trees: dict[str, dict[str, float]] = {}
    raw: dict[str, list[str]] = {}
    current: str | None = None
    stack: list[str] = []
    sf_fps: dict[str, Any] = {}
    for line in ANSI_RE.sub("", text).splitlines():
        body = LOG_PREFIX_RE.sub("", line)
        start = TREE_START_RE.search(body)
        if start:
            current, stack = start.group("name").strip(), []
            trees[current], raw[current] = {}, []
            continue
        fps = SF_FPS_RE.search(body)
        if fps:
            sf_fps = {"collected": fps.group("steps"), "fps": float(fps.group("fps"))}
        if current is None:
            continue
        if not line.strip() or line.startswith("[") or body != line:
            current = None  # a new log record ends the tree's message
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        tokens = [token.strip() for token in line.strip().split(", ")]
        items = [m for token in tokens if (m := TREE_ITEM_RE.match(token))]
        if not items:
            current = None
            continue
        raw[current].append(line.rstrip())
        for match in items:
            path = "/".join([*stack[:depth], match.group("key")])
            trees[current][path] = float(match.group("value"))
        if len(items) == 1:
            # A lone entry may be the parent of the next, deeper lines (leaves come first at each level).
            stack = [*stack[:depth], items[0].group("key")]
    return {"trees": trees, "raw": raw, "sf_fps": sf_fps}


def summarise_profile(profile: dict[str, Any]) -> dict[str, float]:
    """The main costs, in seconds, summed over components of a kind (SF reports the first and last worker)."""
    trees: dict[str, dict[str, float]] = profile.get("trees", {})
    out: Counter[str] = Counter()
    rollout = [t for name, t in trees.items() if name.startswith("RolloutWorker")]
    inference = [t for name, t in trees.items() if name.startswith("InferenceWorker")]
    learner = [t for name, t in trees.items() if name.startswith("Learner")]
    out["rollout_workers_reported"] = len(rollout)
    for tree in rollout:
        for key in ("env_step", "overhead", "wait_for_trajectories", "enqueue_policy_requests",
                    "complete_rollouts", "save_policy_outputs"):
            out[f"rollout/{key}"] += tree.get(key, 0.0)
    for tree in inference:
        for key, value in tree.items():
            leaf = key.rsplit("/", 1)[-1]
            if leaf in ("forward", "deserialize", "stack", "obs_to_device_normalize", "prepare_outputs",
                        "send_messages", "update_model", "wait_policy_total"):
                out[f"inference/{leaf}"] += value
    for tree in learner:
        for key, value in tree.items():
            leaf = key.rsplit("/", 1)[-1]
            if key in ("train", "prepare_batch", "misc") or leaf in ("update", "calculate_losses",
                                                                       "losses_postprocess", "kl_divergence",
                                                                       "after_optimizer", "minibatch_init"):
                out[f"learner/{leaf}"] += value
    for name, tree in trees.items():
        if name.startswith("Runner"):
            out["runner/main_loop"] = tree.get("main_loop", 0.0)
    return dict(out)


def run_training(variant: str, work_dir: Path, frames: int, seed: int, timeout: float,
                 progress: Progress, raw_dir: Path) -> dict[str, Any]:
    """One training job in a subprocess (its own process group) under a timeout, with monitoring."""
    job_dir = work_dir / f"{variant}-{time.strftime('%H%M%S')}"
    job_dir.mkdir(parents=True)
    config = rl_config(frames, seed)
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    server: ServiceProcess | None = None
    process: subprocess.Popen[bytes] | None = None
    monitor = Monitor()
    task = progress.add_task(f"training, {variant}", total=frames)
    result: dict[str, Any] = {"variant": variant, "job_dir": str(job_dir)}
    try:
        extra: dict[str, Any] = {"device": "cpu", "progress_interval": 2}
        if variant == "env_server":
            server = start_service("env", work_dir / "logs", metrics_port=-1)
            extra["env_server"] = server.target
            command = train_command(job_dir)
            command[0] = sys.executable
        else:
            command = [sys.executable, "-m", "benchmarks.bench_learner", "--worker", "inprocess",
                       "--job-dir", str(job_dir)]
        write_job_config(job_dir, config, extra)
        with monitor:
            if server is not None:
                monitor.watch("env_server", server.process.pid)
            with (job_dir / "train.log").open("wb") as log_file:
                process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                           cwd=REPO_ROOT, start_new_session=True)
            monitor.watch("training", process.pid)
            start = time.perf_counter()
            while process.poll() is None and time.perf_counter() - start < timeout:
                records = read_progress(job_dir)
                if records:
                    progress.update(task, completed=min(frames, records[-1]["env_frames"]))
                time.sleep(0.5)
            wall = time.perf_counter() - start
            rc = process.poll()
            if rc is None:
                log.error("%s training did not finish within %.0f s; killing it", variant, timeout)
                kill_group(process)
        result.update(rc=rc, timed_out=rc is None, wall_s=wall, **monitor.result())
    finally:
        if process is not None:
            # Sample Factory's workers normally exit with the runner; make sure no orphan keeps a core busy.
            kill_group(process)
        if server is not None:
            server.stop()
            kill_group(server.process)  # the server's own children, if any
        progress.update(task, visible=False)
    log_text = (job_dir / "train.log").read_text(errors="replace")
    shutil.copyfile(job_dir / "train.log", raw_dir / f"learner-{variant}-train.log")
    if server is not None:
        shutil.copyfile(server.log_path, raw_dir / f"learner-{variant}-server.log")
    result.update(fps_readout(read_progress(job_dir), result["wall_s"]))
    if result.get("second_half_times") and result.get("fps_second_half"):
        # CPU over the same steady window as the FPS: what one trained frame costs, all processes included.
        steady = monitor.util_between(*result["second_half_times"])
        result["steady_cpu_util"] = steady
        ours = steady.get("training", 0.0) + steady.get("env_server", 0.0)
        result["cpu_ms_per_frame"] = 1000 * ours / result["fps_second_half"]
    profile = parse_sf_profiles(log_text)
    result["sf_profile"] = profile
    result["sf_profile_summary"] = summarise_profile(profile)
    if result.get("rc") != 0:
        tail = "\n".join(log_text.splitlines()[-30:])
        log.error("%s training exited with rc=%s; log tail:\n%s", variant, result.get("rc"), tail)
    return result


# --- orchestration ----------------------------------------------------------------------------------
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


def run_benchmark(frames: int, raw_seconds: float, seed: int, timeout: float, guard: Guard, work_dir: Path,
                  raw_dir: Path) -> dict[str, Any]:
    machine = machine_info([ENVS_PER_WORKER])
    machine.update(torch=bench_env._version("torch"), sample_factory=bench_env._version("sample-factory"))
    results: dict[str, Any] = {
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine,
        "settings": {"task": "collect_wood", "actions": "primitives only (frames == decisions)",
                     "num_workers": NUM_WORKERS, "envs_per_worker": ENVS_PER_WORKER, "frames_budget": frames,
                     "raw_seconds": raw_seconds, "seed": seed, "episode_length": EPISODE_LENGTH,
                     "max_others_cpu": guard.max_others, "redo": guard.redo},
    }
    from services.learner.train import sf_argv

    argv = sf_argv(rl_config(frames, seed), work_dir / "job", "cpu")
    results["settings"]["sf_argv"] = argv
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/"
                        "{task.total:,.0f}"), TimeElapsedColumn(), console=console, transient=True)
    with progress:
        results["raw_1"] = guard.measure("raw stepping, 1 process", lambda: measure_raw(
            1, ENVS_PER_WORKER, seed, raw_seconds, progress))
        log.info("raw stepping, 1 process: %.0f frames/s", results["raw_1"]["frames_per_s"])
        results["raw_2"] = guard.measure("raw stepping, 2 processes", lambda: measure_raw(
            NUM_WORKERS, ENVS_PER_WORKER, seed, raw_seconds, progress))
        log.info("raw stepping, 2 processes: %.0f frames/s", results["raw_2"]["frames_per_s"])
        for variant in ("inprocess", "env_server"):
            results[variant] = guard.measure(f"training, {variant}", lambda v=variant: run_training(
                v, work_dir, frames, seed, timeout, progress, raw_dir))
            log.info("training, %s: %s frames/s (second half), rc=%s", variant,
                     fmt_rate(results[variant].get("fps_second_half")), results[variant].get("rc"))
    results["ratios"] = ratios(results)
    results["machine"]["load_average_end"] = list(os.getloadavg())
    return results


def ratios(results: dict[str, Any]) -> dict[str, float | None]:
    raw2 = results.get("raw_2", {}).get("frames_per_s")
    raw1 = results.get("raw_1", {}).get("frames_per_s")
    local = results.get("inprocess", {}).get("fps_second_half")
    remote = results.get("env_server", {}).get("fps_second_half")

    def div(a: float | None, b: float | None) -> float | None:
        return a / b if a and b else None

    return {"inprocess_vs_raw2": div(local, raw2), "env_server_vs_raw2": div(remote, raw2),
            "env_server_vs_inprocess": div(remote, local), "raw2_vs_raw1": div(raw2, raw1)}


# --- report -----------------------------------------------------------------------------------------
VARIANT_LABELS = {"inprocess": "APPO training, env in-process", "env_server": "APPO training via env server"}
SHORT_LABELS = {"inprocess": "in-process training", "env_server": "env-server training"}


def fmt_mib(value: float | None) -> str:
    return f"{value:,.0f} MiB" if value else "-"


def fmt_cpu(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


def profile_line(run: dict[str, Any]) -> str:
    s = run.get("sf_profile_summary", {})
    main = s.get("runner/main_loop", 0.0)
    if not main:
        return "no profile found in the training log"

    def part(key: str) -> str:
        value = s.get(key, 0.0)
        return f"{value:,.1f} s ({value / main:.0%})"

    workers = int(s.get("rollout_workers_reported", 0))
    return (f"main loop {main:,.1f} s; rollout workers (sum of {workers}): env_step {part('rollout/env_step')}, "
            f"enqueue_policy_requests {part('rollout/enqueue_policy_requests')}, overhead {part('rollout/overhead')}, "
            f"waiting for buffers {part('rollout/wait_for_trajectories')}; "
            f"inference: forward {part('inference/forward')}, deserialize+stack "
            f"{(s.get('inference/deserialize', 0.0) + s.get('inference/stack', 0.0)):,.1f} s, waiting for requests "
            f"{part('inference/wait_policy_total')}; learner: train {part('learner/train')} (losses/forward "
            f"{part('learner/calculate_losses')}, update = backward + optimizer {part('learner/update')}), "
            f"prepare_batch {part('learner/prepare_batch')}")


def render_section(results: dict[str, Any]) -> str:
    m, st, rel = results["machine"], results["settings"], results["ratios"]
    raw1, raw2 = results["raw_1"], results["raw_2"]
    batch = next((a.split("=", 1)[1] for a in st["sf_argv"] if a.startswith("--batch_size=")), "?")
    rollout = next((a.split("=", 1)[1] for a in st["sf_argv"] if a.startswith("--rollout=")), "?")
    splits = next((a.split("=", 1)[1] for a in st["sf_argv"] if a.startswith("--worker_num_splits=")), "?")
    lines = [
        SECTION_TITLE, "",
        f"Measured {results['date_utc']} on {m['cpu_model']}, {m['cpu_count']} cores, {m['ram_gib']} GiB RAM, "
        f"Python {m['python']}, torch {m['torch']}, sample-factory {m['sample_factory']}, grpcio {m['grpcio']}, "
        f"crafter {m['crafter']}. Everything (envs, inference, learner, env server) shares these "
        f"{m['cpu_count']} cores.",
        "",
        f"Settings: Crafter task `collect_wood`, primitive actions only (frames == decisions), episode length "
        f"{st['episode_length']}; APPO through `services.learner.train` (`sf_argv`): {st['num_workers']} rollout "
        f"workers x {st['envs_per_worker']} envs ({splits} splits), rollout {rollout}, batch {batch}, 1 epoch, "
        f"no RNN, CPU; budget {st['frames_budget']:,} env frames per run. *Raw stepping*: `CrafterBackend` envs "
        f"({st['envs_per_worker']} per process) with random actions for {st['raw_seconds']:.0f} s, in 1 and in "
        f"{st['num_workers']} processes. *In-process*: a Sample Factory env over a local `Session` (what the "
        "server does per session, minus gRPC), trained through the same code as the learner's jobs. *Via env "
        "server*: `rlgpt serve env` plus `python -m services.learner.train`, as the learner service runs a job "
        "(one session of 1 env per SF env, unary `Step`). Training frames/s = env frames over the second half "
        "of the run (from `progress.jsonl`), so start-up is left out; the overall rate is in parentheses.",
        "",
        "| variant | frames/s | vs raw 2-core stepping | peak RSS | load at start | others' CPU |",
        "|---|---:|---:|---:|---:|---:|",
        f"| raw Crafter stepping, 1 process | {fmt_rate(raw1['frames_per_s'])} | "
        f"{fmt_ratio(rel.get('raw2_vs_raw1') and 1 / rel['raw2_vs_raw1'])} | - | "
        f"{raw1['load_average_start'][0]:.2f} | {fmt_cpu(raw1['others_cpu_util'])} |",
        f"| raw Crafter stepping, {st['num_workers']} processes | {fmt_rate(raw2['frames_per_s'])} | 100% | - | "
        f"{raw2['load_average_start'][0]:.2f} | {fmt_cpu(raw2['others_cpu_util'])} |",
    ]
    for variant in ("inprocess", "env_server"):
        run = results[variant]
        rss = run.get("peak_rss_mib", {})
        mem = fmt_mib(rss.get("training"))
        if variant == "env_server":
            mem += f" + server {fmt_mib(rss.get('env_server'))}"
        lines.append(
            f"| {VARIANT_LABELS[variant]} | {fmt_rate(run.get('fps_second_half'))} "
            f"({fmt_rate(run.get('fps_overall_wall'))}) | {fmt_ratio(rel.get(f'{variant}_vs_raw2'))} | {mem} | "
            f"{run['load_average_start'][0]:.2f} | {fmt_cpu(run.get('others_cpu_util'))} |")
    lines += [
        "",
        f"Env server / in-process training: {fmt_ratio(rel.get('env_server_vs_inprocess'))}. Peak RSS is summed "
        "over the training process tree (runner, learner, inference and rollout worker processes; shared "
        "libraries such as torch count once per process), polled every 0.5 s; peak PSS, which shares them out: "
        + ", ".join(f"{variant} {fmt_mib(results[variant].get('peak_pss_mib', {}).get('training'))}"
                    for variant in ("inprocess", "env_server"))
        + f". *Others' CPU* is what processes outside the benchmark used during the window (100% = one core); "
        f"a window above {st['max_others_cpu']:.0%} is redone up to {st['redo']} times.",
        "",
        cpu_paragraph(results),
        "",
        "Sample Factory's own profile (its end-of-run timing trees; seconds summed over the components of a kind, "
        "shares of the runner's main loop):",
        "",
    ]
    for variant in ("inprocess", "env_server"):
        lines.append(f"- {VARIANT_LABELS[variant]}: {profile_line(results[variant])}.")
    windows = (("raw 1 process", "raw_1"), ("raw 2 processes", "raw_2"), ("in-process training", "inprocess"),
               ("env-server training", "env_server"))
    redone = [f"{label} ({len(results[key]['attempts'])} attempts)" for label, key in windows
              if len(results[key].get("attempts", [])) > 1]
    if redone:
        lines += ["", "Redone because other processes were busy: " + ", ".join(redone) + "."]
    lines += ["", reading(results), ""]
    return "\n".join(lines)


def cpu_paragraph(results: dict[str, Any]) -> str:
    """CPU per frame over the steady window (the FPS's window): what each variant spends for one frame."""
    raw2 = results["raw_2"]
    bits = [f"raw stepping {raw2['cpu_ms_per_frame']:.2f} ms (the {raw2['processes']} processes used "
            f"{sum(p['cpu_util'] for p in raw2['parts']):.0%})"]
    for variant in ("inprocess", "env_server"):
        run = results[variant]
        steady = run.get("steady_cpu_util", {})
        if not run.get("cpu_ms_per_frame"):
            continue
        used = f"training processes {steady.get('training', 0.0):.0%}"
        if "env_server" in steady:
            used += f" + env server {steady['env_server']:.0%}"
        bits.append(f"{SHORT_LABELS[variant]} {run['cpu_ms_per_frame']:.2f} ms ({used}, others "
                    f"{steady.get('others', 0.0):.0%})")
    return ("CPU time per frame over the same steady window as the frames/s (100% = one core): "
            + "; ".join(bits) + ".")


def reading(results: dict[str, Any]) -> str:
    """The plain-words reading, written from the numbers so reruns stay honest."""
    rel, st = results["ratios"], results["settings"]
    cores = results["machine"]["cpu_count"] or 2
    local, remote = rel.get("inprocess_vs_raw2"), rel.get("env_server_vs_raw2")
    if local is None or remote is None:
        return "**A training run failed, so the goal could not be checked**; see the raw JSON and training logs."
    met = max(local, remote) >= GOAL_RATIO
    parts = [f"**The goal (training at >= {GOAL_RATIO:.0%} of raw {st['num_workers']}-core Crafter stepping) is "
             f"{'met' if met else 'not met'}**: in-process {fmt_ratio(local)}, via the env server "
             f"{fmt_ratio(remote)}."]
    raw_ms = results["raw_2"].get("cpu_ms_per_frame")
    run = results["inprocess"]
    train_ms, steady = run.get("cpu_ms_per_frame"), run.get("steady_cpu_util", {})
    if raw_ms and train_ms:
        used = steady.get("training", 0.0)
        parts.append(
            f"Raw stepping spends all {cores} cores on Crafter ({raw_ms:.2f} ms of CPU per frame); training runs "
            f"the policy's inference, the learner's forward and backward passes and Sample Factory's plumbing "
            f"(queues, shared-memory trajectory buffers, batching) on the same cores, and in-process it costs "
            f"{train_ms:.2f} ms of CPU per frame, {train_ms / raw_ms:.1f}x the env alone, so even with both cores "
            f"busy all the time it could reach only about {min(1.0, raw_ms / train_ms):.0%} of raw stepping. Its "
            f"processes kept {used:.0%} of the {cores} cores busy"
            + ("; CPU per frame, not waiting, is what limits it." if used >= 0.9 * cores else
               f"; the other {cores - used:.0%} of a core's worth is idle time (waits between pipeline stages), "
               "a second, smaller loss."))
    s = run.get("sf_profile_summary", {})
    main = s.get("runner/main_loop", 0.0)
    if main:
        def share(key: str) -> str:
            return f"{s.get(key, 0.0) / (cores * main):.0%}"

        parts.append(
            f"Sample Factory's timers (wall-clock inside each process, so they include waiting for a core): "
            f"in-process, env_step filled {share('rollout/env_step')} of the {cores} cores' time, "
            f"enqueue_policy_requests {share('rollout/enqueue_policy_requests')}, inference forward "
            f"{share('inference/forward')} and learner training {share('learner/train')} (backward and optimizer "
            f"{share('learner/update')}).")
    ratio = rel.get("env_server_vs_inprocess")
    remote_run = results["env_server"]
    remote_ms, rs = remote_run.get("cpu_ms_per_frame"), remote_run.get("steady_cpu_util", {})
    if ratio:
        text = f"Through the env server, training reaches {ratio:.0%} of the in-process rate"
        if remote_ms and train_ms:
            text += f" and costs {remote_ms:.2f} ms of CPU per frame ({remote_ms / train_ms:.1f}x in-process)"
        busy = rs.get("training", 0.0) + rs.get("env_server", 0.0)
        if rs and busy < 0.9 * cores:
            text += (f", yet its processes kept only {busy:.0%} of the {cores} cores busy (training processes "
                     f"{rs.get('training', 0.0):.0%}, env server {rs.get('env_server', 0.0):.0%}), so it is "
                     "latency-bound: each SF env is its own 1-env session and each rollout worker steps its envs "
                     f"one after another with one unary `Step` per frame, so at most {st['num_workers']} requests "
                     "are in flight, every frame waits for a gRPC round trip, and a single server process "
                     "does the Crafter work of all of them.")
        else:
            text += ("; every frame pays a gRPC round trip, protobuf encoding of a 64x64 image and thread "
                     "hand-offs on the same cores.")
        rsum = remote_run.get("sf_profile_summary", {})
        workers, rmain = rsum.get("rollout_workers_reported", 0), rsum.get("runner/main_loop", 0.0)
        if workers and rmain:
            text += (f" SF's env_step, which here is mostly waiting for the RPC, filled "
                     f"{rsum.get('rollout/env_step', 0.0) / (workers * rmain):.0%} of the rollout workers' time.")
        parts.append(text)
    return " ".join(parts)




def print_summary(results: dict[str, Any]) -> None:
    rel = results["ratios"]
    table = Table(title="Crafter frames/s: raw stepping vs. APPO training")
    for column in ("variant", "frames/s", "vs raw 2-core", "peak RSS", "others' CPU"):
        table.add_column(column, justify="right")
    table.add_row("raw, 1 process", fmt_rate(results["raw_1"]["frames_per_s"]), "-", "-",
                  fmt_cpu(results["raw_1"]["others_cpu_util"]))
    table.add_row("raw, 2 processes", fmt_rate(results["raw_2"]["frames_per_s"]), "100%", "-",
                  fmt_cpu(results["raw_2"]["others_cpu_util"]))
    for variant in ("inprocess", "env_server"):
        run = results[variant]
        rss = run.get("peak_rss_mib", {})
        table.add_row(VARIANT_LABELS[variant], fmt_rate(run.get("fps_second_half")),
                      fmt_ratio(rel.get(f"{variant}_vs_raw2")),
                      fmt_mib(rss.get("training")) + (f" + {fmt_mib(rss.get('env_server'))}"
                                                      if "env_server" in rss else ""),
                      fmt_cpu(run.get("others_cpu_util")))
    Console().print(table)


# --- main -------------------------------------------------------------------------------------------
def main(
    output: Annotated[Path, typer.Option(help="Markdown file whose learner section is replaced.")] = Path(
        "docs/BENCHMARKS.md"),
    raw_json: Annotated[Path, typer.Option(help="Where the raw results go (JSON).")] = Path(
        "docs/bench-raw/learner.json"),
    frames: Annotated[int, typer.Option(help="Env-frame budget of each training run.", min=1000)] = 30000,
    raw_seconds: Annotated[float, typer.Option(help="Seconds of each raw-stepping window.", min=1)] = 15.0,
    seed: Annotated[int, typer.Option(help="Base seed of worlds and actions.")] = 0,
    timeout: Annotated[float, typer.Option(help="Seconds a training run may take before it is killed.")] = 600.0,
    max_others: Annotated[float, typer.Option(help="Redo a window when other processes used more than this "
                                                   "(cores).")] = 0.15,
    redo: Annotated[int, typer.Option(help="Redos of a disturbed window.", min=0)] = 2,
    max_load: Annotated[float, typer.Option(help="1-min load average to wait for (briefly) before a "
                                                 "window.")] = 1.0,
    quiet_timeout: Annotated[float, typer.Option(help="Longest wait for a quiet machine before a window "
                                                      "(s).")] = 900.0,
    work_dir: Annotated[Path | None, typer.Option(help="Where jobs run (default: a temporary directory, "
                                                       "removed at the end).")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
    worker: Annotated[str, typer.Option(hidden=True, help="Internal: 'inprocess' runs one training job.")] = "",
    job_dir: Annotated[Path | None, typer.Option(hidden=True, help="Internal: the job of --worker.")] = None,
) -> None:
    """Measure APPO training FPS on Crafter (env in-process and via the env server) against raw stepping."""
    if worker:
        # A training subprocess: plain logging to its log file, like services.learner.train.
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if worker != "inprocess" or job_dir is None:
            raise typer.BadParameter("--worker inprocess needs --job-dir")
        raise typer.Exit(run_inprocess_job(job_dir.resolve()))
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(message)s",
                        handlers=[RichHandler(console=console, show_path=False)])
    raw_json.parent.mkdir(parents=True, exist_ok=True)
    own_work_dir = work_dir is None
    work = Path(tempfile.mkdtemp(prefix="bench-learner-")) if work_dir is None else work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    guard = Guard(max_others=max_others, redo=redo, max_load=max_load, quiet_timeout=quiet_timeout)
    started = time.perf_counter()
    try:
        results = run_benchmark(frames, raw_seconds, seed, timeout, guard, work, raw_json.parent)
    finally:
        if own_work_dir:
            shutil.rmtree(work, ignore_errors=True)
    results["total_seconds"] = time.perf_counter() - started
    raw_json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    write_section(output, SECTION_TITLE, render_section(results))
    print_summary(results)
    log.info("wrote %s and %s in %.0f s", output, raw_json, results["total_seconds"])


if __name__ == "__main__":
    typer.run(main)
