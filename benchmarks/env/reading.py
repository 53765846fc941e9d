"""The plain-words reading of a bench-env run: every sentence is computed from that run's numbers (which path
is faster, by how much, where the goal is crossed, what the profile and the CPU accounting say)."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.common import fmt_pct, joined
from benchmarks.env.numbers import outside_handler

GOAL_RATIO = 0.85  # gRPC throughput as a share of in-process, at GOAL_MIN_ENVS envs and more
GOAL_MIN_ENVS = 16
BUSY_OTHERS = 0.2  # cores other processes used on average above which the contention estimate is given
LABELS = {"grpc_unary": "unary `Step`", "grpc_stream_lockstep": "`StreamSteps` (lockstep)"}
CRAFTER_PARTS = ("Crafter", "Backend wrapper")

Ratios = dict[int, dict[str, float]]


def envs_text(counts: list[int]) -> str:
    return f"{joined([str(c) for c in counts])} env{'s' * (len(counts) > 1 or counts[0] != 1)}"


def comparison(rel: Ratios, path: str) -> str:
    """Whether ``path`` is faster or slower than in-process, at which env counts and by how much."""
    pairs = [(envs, row[path]) for envs, row in rel.items() if path in row]
    groups = [(word, group) for word, group in (
        ("faster", [p for p in pairs if p[1] > 1.0]), ("slower", [p for p in pairs if p[1] < 1.0]),
        ("as fast", [p for p in pairs if p[1] == 1.0])) if group]
    clauses = []
    for i, (word, group) in enumerate(groups):
        versus = "" if i else (" as in-process" if word == "as fast" else " than in-process")
        by = "" if word == "as fast" else f" (by {joined([fmt_pct(abs(r - 1.0)) for _, r in group])})"
        clauses.append(f"{word}{versus} at {envs_text([e for e, _ in group])}{by}")
    label = LABELS[path]
    return f"{label[0].upper()}{label[1:]} is {' and '.join(clauses)}." if clauses else ""


def crossing(rel: Ratios, path: str, goal: float = GOAL_RATIO) -> str:
    """Where ``path`` first reaches ``goal`` of in-process, and whether it stays there at larger counts."""
    pairs = sorted((envs, row[path]) for envs, row in rel.items() if path in row)
    if not pairs:
        return ""
    label = LABELS[path]
    first = next((i for i, (_e, r) in enumerate(pairs) if r >= goal), None)
    if first is None:
        best_envs, best = max(pairs, key=lambda p: p[1])
        return (f"{label[0].upper()}{label[1:]} stays below {goal:.0%} of in-process at every count measured "
                f"(best {fmt_pct(best)} at {envs_text([best_envs])}).")
    text = f"{label[0].upper()}{label[1:]} first reaches {goal:.0%} of in-process at {envs_text([pairs[first][0]])}"
    below = [e for e, r in pairs[first + 1:] if r < goal]
    if below:
        return text + f" but falls below it again at {envs_text(below)}."
    return text + (" and stays there at every larger count." if pairs[first + 1:] else ".")


def verdict(rel: Ratios, big: list[int]) -> str:
    def met(key: str) -> bool:
        return all(rel[e].get(key, 0.0) >= GOAL_RATIO for e in big)

    ratio_text = "; ".join(f"{e} envs: unary {fmt_pct(rel[e].get('grpc_unary'))}, stream "
                           f"{fmt_pct(rel[e].get('grpc_stream_lockstep'))}" for e in big)
    goal = f"the goal (>= {GOAL_RATIO:.0%} of in-process throughput through gRPC at {GOAL_MIN_ENVS}+ envs)"
    if met("grpc_unary") and met("grpc_stream_lockstep"):
        return f"**As measured, {goal} is met** ({ratio_text})."
    if met("grpc_unary") or met("grpc_stream_lockstep"):
        return (f"**As measured, {goal} is met only with "
                f"{'unary Step' if met('grpc_unary') else 'StreamSteps'}** ({ratio_text}).")
    return f"**As measured, {goal} is not met** ({ratio_text})."


def server_work(results: dict[str, Any], big: list[int]) -> str:
    """What the server adds per frame, from the in-process replay of Step and the gRPC unary numbers."""
    measurements = results["measurements"]
    work, transport = [], []
    for e in big:
        base, pipe, unary = (measurements.get(f"{p}/{e}") for p in ("in_process", "server_pipeline", "grpc_unary"))
        if base and pipe and unary:
            base_us, pipe_us, unary_us = (1e6 / m["frames_per_s"] for m in (base, pipe, unary))
            work.append(pipe_us / base_us - 1)
            transport.append((unary_us - pipe_us) / base_us)
    if not work:
        return ""
    outside = {path: [v for e in big if (v := outside_handler(measurements.get(f"{path}/{e}"))) is not None]
               for path in ("grpc_unary", "grpc_stream_lockstep")}
    text = (f"Per frame, relative to the bare envs, the server's own work (task bookkeeping in `Session.step`, "
            f"building the response) adds {np.mean(work):+.0%} (in-process replay of `Step`)")
    if outside["grpc_unary"]:
        shares = [f"{np.mean(outside['grpc_unary']):.0%} (unary)"]
        if outside["grpc_stream_lockstep"]:
            shares.append(f"{np.mean(outside['grpc_stream_lockstep']):.0%} (stream)")
        text += (f"; of the gRPC round-trip time, {' and '.join(shares)} is spent outside the server's Step "
                 "handler (transport, thread hand-offs, the client)")
    else:
        text += f", and the gRPC unary round trip {np.mean(transport):+.0%}"
    return text + f", averaged over {envs_text(big)}."


def spread(results: dict[str, Any], path: str = "") -> float | None:
    """Median over measurements (of ``path``, or all) of (fastest - slowest slice rate) / overall rate."""
    values = [(max(m["round_rates"]) - min(m["round_rates"])) / m["frames_per_s"]
              for m in results["measurements"].values()
              if (not path or m["path"] == path) and len(m["round_rates"]) > 1 and m["frames_per_s"]]
    return float(np.median(values)) if values else None


def pinned(results: dict[str, Any], rel: Ratios, big: list[int]) -> str:
    rows = [(e, rel[e]["grpc_unary_pinned"], rel[e]["grpc_unary"]) for e in big
            if "grpc_unary_pinned" in rel[e] and "grpc_unary" in rel[e]]
    if not rows:
        return ""
    gain = float(np.mean([p - u for _e, p, u in rows]))
    noise = spread(results, "grpc_unary")
    text = ("With every server thread pinned to one core, unary reaches "
            + ", ".join(f"{fmt_pct(p)} at {e} envs" for e, p, _u in rows)
            + f" ({gain * 100:+.0f} points over the unpinned server")
    if noise is None:
        return text + ")."
    bigger = abs(gain) > noise
    return text + (f", {'more' if bigger else 'less'} than the median spread of unary's slice rates, "
                   f"{fmt_pct(noise)}), so in this run pinning made "
                   + (f"a difference {'up' if gain > 0 else 'down'} beyond the noise." if bigger
                      else "no difference beyond the noise."))


def contention(results: dict[str, Any], rel: Ratios, big: list[int]) -> str:
    """Other processes' load while timing and, on a busy machine, what the run-queue waits account for."""
    measured = list(results["measurements"].values())
    others = [m["extra"]["other_cpu_util"] for m in measured if "other_cpu_util" in m["extra"]]
    if not others:
        return ""
    cores = results["machine"]["cpu_count"]
    noise = spread(results)
    text = (f"Other processes used {np.mean(others):.2f} of the {cores} cores on average while timing"
            + (f", and the slice rates of one path varied by {fmt_pct(noise)} (median)" if noise is not None else ""))
    unary = [m for e in big if (m := results["measurements"].get(f"grpc_unary/{e}"))]
    local = [m for e in big if (m := results["measurements"].get(f"in_process/{e}"))]
    if np.mean(others) <= BUSY_OTHERS or not (unary and local):
        return text + "."
    grpc_cpu = np.mean([m["extra"]["server_cpu_util"] + m["extra"]["client_cpu_util"] for m in unary])
    grpc_wait = np.mean([m["extra"]["server_runq_wait_util"] + m["extra"]["client_runq_wait_util"] for m in unary])
    local_cpu = np.mean([m["extra"]["client_cpu_util"] for m in local])
    local_wait = np.mean([m["extra"]["client_runq_wait_util"] for m in local])
    adjusted_ok = all(rel[e].get(f"{p}:adjusted", 0.0) >= GOAL_RATIO for e in big for p in LABELS)
    adjusted = "; ".join(f"{e} envs: unary {fmt_pct(rel[e].get('grpc_unary:adjusted'))}, stream "
                         f"{fmt_pct(rel[e].get('grpc_stream_lockstep:adjusted'))}" for e in big)
    return text + (
        f". At {envs_text(big)}, unary used {grpc_cpu:.2f} cores (server and client) against {local_cpu:.2f} "
        f"in-process, and its critical-path threads waited for a core {grpc_wait:.0%} of the time against "
        f"{local_wait:.0%}. Taking that waiting out of both sides gives {adjusted} (an estimate that ignores "
        f"cache effects), which {'meets' if adjusted_ok else 'misses'} the goal.")


def per_call(results: dict[str, Any]) -> str:
    """How the unary overhead per frame and per call changes from the smallest to the largest session."""
    counts = [e for e in results["machine"]["envs"]
              if f"grpc_unary/{e}" in results["measurements"] and f"in_process/{e}" in results["measurements"]]
    if len(counts) < 2:
        return ""
    lo, hi = min(counts), max(counts)

    def overhead_us(e: int) -> float:
        m = results["measurements"]
        return 1e6 / m[f"grpc_unary/{e}"]["frames_per_s"] - 1e6 / m[f"in_process/{e}"]["frames_per_s"]

    a, b = overhead_us(lo), overhead_us(hi)

    def versus(us: float) -> str:
        return f"{abs(us):,.0f} µs {'more' if us >= 0 else 'less'}"

    return (f"Per frame, unary `Step` took {versus(a)} than in-process at {envs_text([lo])} and {versus(b)} at "
            f"{envs_text([hi])} ({versus(a * lo)} and {versus(b * hi)} per call), so in this run more envs per "
            + ("session lowered the cost per frame." if b < a else "session did not lower the cost per frame."))


def profile(results: dict[str, Any]) -> str:
    shares = results.get("profile", {}).get("shares", {})
    if not shares:
        return ""
    crafter = {k: v for k, v in shares.items() if k.startswith(CRAFTER_PARTS)}
    render = next((v for k, v in shares.items() if k.startswith("Crafter render")), 0.0)
    rest = [f"{k.split(' (')[0].lower()} {v:.0%}" for k, v in shares.items() if k not in crafter and v >= 0.005]
    return (f"Inside the server, Crafter itself takes {sum(crafter.values()):.0%} of the busy time (rendering "
            f"alone {render:.0%})" + (f"; the rest is {', '.join(rest)}." if rest else "."))


def reading(results: dict[str, Any], rel: Ratios) -> str:
    big = [envs for envs in results["machine"]["envs"] if envs >= GOAL_MIN_ENVS]
    parts = [verdict(rel, big) if big else
             f"No session with {GOAL_MIN_ENVS}+ envs was measured, so the {GOAL_RATIO:.0%} goal was not checked."]
    for path in LABELS:
        parts += [comparison(rel, path), crossing(rel, path)]
    parts += [server_work(results, big), pinned(results, rel, big), contention(results, rel, big),
              per_call(results), profile(results)]
    return " ".join(p for p in parts if p)
