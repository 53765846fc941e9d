"""What bench-learner measures: raw Crafter stepping in 1 and N processes, and one APPO training job (env
in-process or via the env server) with its frames/s, CPU, memory and Sample Factory profile, as plain data."""

from __future__ import annotations

import logging
import multiprocessing as mp
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from rich.progress import Progress

from benchmarks.learner import SERVER_COUNTS
from benchmarks.learner.monitor import Monitor
from benchmarks.learner.sf_profile import parse_sf_profiles, summarise_profile
from benchmarks.training import follow_training, launch_training
from rlgpt.app.launcher import ServiceProcess, start_service
from rlgpt.v1 import common_pb2, learner_pb2
from services.env_server.backends.crafter import CrafterBackend
from services.learner.jobs import TRAIN_MODULE, LocalHandle, kill_group, prepare_job_dir, read_progress
from services.learner.rl_config import DEFAULT_ENVS_PER_WORKER

log = logging.getLogger("benchmarks.learner")

NUM_WORKERS = 2
ENVS_PER_WORKER = DEFAULT_ENVS_PER_WORKER  # the learner's own default, unless the bench is told otherwise
EPISODE_LENGTH = 1000  # RLConfig's default once validated; the learner service fills it in the same way
WARMUP_FRAMES = 400  # per raw-stepping process: first renders fill Crafter's texture caches
INPROCESS_MODULE = "benchmarks.learner.inprocess"
"""The training entry point of the in-process variant (the learner's training with the env swapped)."""


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
def rl_config(frames: int, seed: int, envs_per_worker: int = ENVS_PER_WORKER) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(
        name="bench-wood", backend="crafter", task=common_pb2.TaskSpec(name="collect_wood"),
        reward_terms=[common_pb2.RewardTerm(kind="success", weight=1.0),
                      common_pb2.RewardTerm(kind="inventory_gain", target="wood", weight=0.1)],
        episode_length=EPISODE_LENGTH, env_frames=frames, num_workers=NUM_WORKERS,
        envs_per_worker=envs_per_worker, seed=seed, skill_max_steps=1)


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



def run_training(variant: str, work_dir: Path, frames: int, seed: int, timeout: float,
                 progress: Progress, raw_dir: Path, envs_per_worker: int = ENVS_PER_WORKER) -> dict[str, Any]:
    """One training job through the learner's local runner (its own process group) under a timeout, with
    monitoring."""
    job_dir = work_dir / f"{variant}-{time.strftime('%H%M%S')}"
    job_dir.mkdir(parents=True)
    config = rl_config(frames, seed, envs_per_worker)
    servers: list[ServiceProcess] = []
    handle: LocalHandle | None = None
    monitor = Monitor()
    task = progress.add_task(f"training, {variant}", total=frames)
    result: dict[str, Any] = {"variant": variant, "job_dir": str(job_dir)}
    try:
        extra: dict[str, Any] = {"device": "cpu", "progress_interval": 2}
        module = INPROCESS_MODULE
        if variant in SERVER_COUNTS:
            # One env-server process per rollout worker for the scaled-out variant (the learner puts worker w's
            # session on server w mod n, as a job given several env servers does).
            servers = [start_service("env", work_dir / "logs", metrics_port=-1) for _ in range(SERVER_COUNTS[variant])]
            extra["env_server"] = servers[0].target
            extra["env_servers"] = [server.target for server in servers]
            module = TRAIN_MODULE
        prepare_job_dir(job_dir, config, extra)
        with monitor:
            for i, server in enumerate(servers):
                monitor.watch("env_server" if i == 0 else f"env_server_{i + 1}", server.process.pid)
            handle = launch_training(job_dir, config, module)
            monitor.watch("training", handle.process.pid)
            start = time.perf_counter()
            rc = follow_training(handle, job_dir, timeout, lambda last: progress.update(
                task, completed=min(frames, last["env_frames"])), interval=0.5)
            wall = time.perf_counter() - start
            if rc is None:
                log.error("%s training did not finish within %.0f s; killing it", variant, timeout)
                handle.kill()
        result.update(rc=rc, timed_out=rc is None, wall_s=wall, **monitor.result())
    finally:
        if handle is not None:
            # Sample Factory's workers normally exit with the runner; make sure no orphan keeps a core busy.
            kill_group(handle.process)
        for server in servers:
            server.stop()
            kill_group(server.process)  # the server's own children, if any
        progress.update(task, visible=False)
    log_text = (job_dir / "train.log").read_text(errors="replace")
    shutil.copyfile(job_dir / "train.log", raw_dir / f"{variant}-train.log")
    for i, server in enumerate(servers):
        shutil.copyfile(server.log_path, raw_dir / f"{variant}-server{'' if i == 0 else i + 1}.log")
    result.update(fps_readout(read_progress(job_dir), result["wall_s"]))
    if result.get("second_half_times") and result.get("fps_second_half"):
        # CPU over the same steady window as the FPS: what one trained frame costs, all processes included.
        steady = monitor.util_between(*result["second_half_times"])
        result["steady_cpu_util"] = steady
        ours = sum(cores for name, cores in steady.items() if name == "training" or name.startswith("env_server"))
        result["cpu_ms_per_frame"] = 1000 * ours / result["fps_second_half"]
    profile = parse_sf_profiles(log_text)
    result["sf_profile"] = profile
    result["sf_profile_summary"] = summarise_profile(profile)
    if result.get("rc") != 0:
        tail = "\n".join(log_text.splitlines()[-30:])
        log.error("%s training exited with rc=%s; log tail:\n%s", variant, result.get("rc"), tail)
    return result

