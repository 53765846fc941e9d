"""One bench-env run: every env count's plan stepped by every path (interleaved), memory probes and the
server profile, returned as plain data (the raw JSON the report is built from)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks.common import MIB, machine_info, utc_now
from benchmarks.env.grpc_paths import (
    PinnedUnaryRunner,
    StreamRunner,
    UnaryRunner,
    close_session,
    create_session,
    session_peak_memory,
    start_server,
)
from benchmarks.env.measure import WARMUP_FRAMES, Measurement, Plan, calibrate, in_process_memory
from benchmarks.env.runners import InProcessRunner, PipelineRunner, RawCrafterRunner, Runner, measure_interleaved
from benchmarks.env.server_profile import run_profile
from rlgpt.app.launcher import ServiceProcess
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import env_pb2_grpc

SESSION_MEMORY_ENVS = 16
"""Envs of the session whose peak memory is probed (a rollout worker's session at the bench's largest use)."""
log = logging.getLogger("benchmarks.env")
console = Console(stderr=True)


def run_benchmark(env_counts: list[int], seconds: float, rounds: int, seed: int, profile_envs: int,
                  profile_seconds: int, profiler: str, raw_dir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {
        "date_utc": utc_now(),
        "machine": {**machine_info(("grpcio", "protobuf", "numpy", "crafter")), "envs": env_counts},
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
                results["memory"]["session_peak"] = session_peak_memory(stub, server, SESSION_MEMORY_ENVS, seed)
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
                    if envs == min(env_counts):
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

