"""Numbers derived from bench-env's raw results: ratios to in-process, time outside the Step handler, rates
with run-queue waits taken out. The report's tables and sentences both read them."""

from __future__ import annotations

from typing import Any

import numpy as np

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


def rate(results: dict[str, Any], path: str, envs: int) -> float | None:
    m = results["measurements"].get(f"{path}/{envs}")
    return m["frames_per_s"] if m else None
