"""The plain-words reading of a bench-learner run: every sentence is computed from that run's numbers (which
variant is faster, by how much, whether the goal is crossed, what CPU per frame and SF's timers say)."""

from __future__ import annotations

from typing import Any

from benchmarks.common import fmt_pct
from benchmarks.learner import VARIANTS

SHORT_LABELS_READING = {"env_server": "training through one env server",
                        "env_servers_2": "training through 2 env servers"}

INPROCESS_GOAL = 0.55  # in-process training frames/s as a share of raw stepping in num_workers processes
SERVER_GOAL = 0.90  # training through env servers as a share of in-process training
CPU_BOUND = 0.9  # share of the cores a variant's processes kept busy from which CPU, not waiting, limits it


def ratios(results: dict[str, Any]) -> dict[str, float | None]:
    """Each training variant against raw stepping in num_workers processes and against in-process training."""
    raw2 = results.get("raw_2", {}).get("frames_per_s")
    raw1 = results.get("raw_1", {}).get("frames_per_s")
    local = results.get("inprocess", {}).get("fps_second_half")

    def div(a: float | None, b: float | None) -> float | None:
        return a / b if a and b else None

    out: dict[str, float | None] = {"raw2_vs_raw1": div(raw2, raw1)}
    for variant in VARIANTS:
        fps = results.get(variant, {}).get("fps_second_half")
        out[f"{variant}_vs_raw2"] = div(fps, raw2)
        if variant != "inprocess":
            out[f"{variant}_vs_inprocess"] = div(fps, local)
    return out


def busy_cores(run: dict[str, Any]) -> float:
    """Cores the variant's own processes (training tree, env server) kept busy over the steady window."""
    steady = run.get("steady_cpu_util", {})
    return sum(cores for name, cores in steady.items() if name == "training" or name.startswith("env_server"))


def rest_of_cores(run: dict[str, Any], cores: int) -> str:
    """Where the cores a variant did not use went: to other processes, or idle (its pipeline waiting)."""
    used, others = busy_cores(run), run.get("steady_cpu_util", {}).get("others", 0.0)
    idle = max(0.0, cores - used - others)
    return (f"the other {cores - used:.2f} went to other processes ({others:.2f}) or sat idle ({idle:.2f}) "
            "while it waited")


def verdict(rel: dict[str, float | None], workers: int) -> str:
    local = rel["inprocess_vs_raw2"]
    servers = {v: rel[f"{v}_vs_inprocess"] for v in VARIANTS if v != "inprocess"}
    if local is None or any(value is None for value in servers.values()):
        return "**A training run failed, so the goals could not be checked**; see the raw JSON and training logs."
    # One decimal here: a rate just under a goal must not read as the goal itself.
    met = [f"{SHORT_LABELS_READING[v]} ({value:.1%})" for v, value in servers.items() if value >= SERVER_GOAL]
    missed = [f"{SHORT_LABELS_READING[v]} ({value:.1%})" for v, value in servers.items() if value < SERVER_GOAL]
    first = (f"**In-process training reached {local:.1%} of raw {workers}-process stepping: the goal of >= "
             f"{INPROCESS_GOAL:.0%} is {'met' if local >= INPROCESS_GOAL else 'not met'}.**")
    second = (f" **Training through env servers at >= {SERVER_GOAL:.0%} of the in-process rate: "
              + (f"met by {' and '.join(met)}" if met else "not met")
              + (f"; not by {' and '.join(missed)}" if met and missed else
                 f" ({' and '.join(missed)})" if missed else "") + ".**")
    return first + second


def cpu_limit(results: dict[str, Any], cores: int) -> str:
    """In-process training's CPU per frame against raw stepping's, and the rate all cores could give at that cost."""
    raw2, run = results["raw_2"], results["inprocess"]
    raw_ms, train_ms = raw2.get("cpu_ms_per_frame"), run.get("cpu_ms_per_frame")
    if not (raw_ms and train_ms and raw2.get("frames_per_s")):
        return ""
    raw_busy = sum(p["cpu_util"] for p in raw2["parts"])
    ceiling = cores * 1000 / train_ms / raw2["frames_per_s"]
    used = busy_cores(run)
    return (f"Raw stepping kept {raw_busy:.2f} of the {cores} cores busy at {raw_ms:.2f} ms of CPU per frame; "
            f"in-process training costs {train_ms:.2f} ms of CPU per frame ({train_ms / raw_ms:.1f}x), so with all "
            f"{cores} cores busy it could reach about {ceiling:.0%} of raw stepping. Its processes kept "
            f"{used:.2f} cores busy" + (f" (at least {CPU_BOUND:.0%} of them), so CPU per frame is what limits it."
                                        if used >= CPU_BOUND * cores else
                                        f"; {rest_of_cores(run, cores)}."))


def sf_timers(results: dict[str, Any], cores: int) -> str:
    s = results["inprocess"].get("sf_profile_summary", {})
    main = s.get("runner/main_loop", 0.0)
    if not main:
        return ""

    def share(key: str) -> str:
        return f"{s.get(key, 0.0) / (cores * main):.0%}"

    return (f"Sample Factory's timers (wall-clock inside each process, so they include waiting for a core): "
            f"in-process, env_step filled {share('rollout/env_step')} of the {cores} cores' time, "
            f"enqueue_policy_requests {share('rollout/enqueue_policy_requests')}, inference forward "
            f"{share('inference/forward')} and learner training {share('learner/train')} (backward and optimizer "
            f"{share('learner/update')}).")


def env_step_share(run: dict[str, Any]) -> float | None:
    """SF's env_step as a share of the reported rollout workers' main-loop time."""
    s = run.get("sf_profile_summary", {})
    workers, main = s.get("rollout_workers_reported", 0), s.get("runner/main_loop", 0.0)
    return s.get("rollout/env_step", 0.0) / (workers * main) if workers and main else None


def env_server(results: dict[str, Any], rel: dict[str, float | None], cores: int, variant: str) -> str:
    ratio = rel[f"{variant}_vs_inprocess"]
    if not ratio:
        return ""
    local, remote = results["inprocess"], results[variant]
    label = SHORT_LABELS_READING[variant]
    word = "faster" if ratio > 1 else "slower" if ratio < 1 else "as fast"
    text = f"{label.capitalize()} is {word} than in-process training ({fmt_pct(ratio)} of its rate)"
    local_ms, remote_ms = local.get("cpu_ms_per_frame"), remote.get("cpu_ms_per_frame")
    if local_ms and remote_ms:
        text += f" and costs {remote_ms:.2f} ms of CPU per frame ({remote_ms / local_ms:.2f}x in-process)"
    steady = remote.get("steady_cpu_util", {})
    if steady:
        used = busy_cores(remote)
        servers = sum(value for name, value in steady.items() if name.startswith("env_server"))
        text += (f"; its processes kept {used:.2f} of the {cores} cores busy (training processes "
                 f"{steady.get('training', 0.0):.2f}, env servers {servers:.2f}), so "
                 + ("CPU per frame is what limits it" if used >= CPU_BOUND * cores else
                    f"it was not CPU-bound: {rest_of_cores(remote, cores)}"))
    share, local_share = env_step_share(remote), env_step_share(local)
    if share is not None:
        text += (f". SF's env_step (which includes the gRPC round trip) filled {share:.0%} of the rollout workers' "
                 "time" + (f", against {local_share:.0%} in-process" if local_share is not None else ""))
    return text + "."


def reading(results: dict[str, Any]) -> str:
    rel = ratios(results)
    cores = results["machine"]["cpu_count"] or 2
    parts = [verdict(rel, results["settings"]["num_workers"])]
    if rel["inprocess_vs_raw2"] is not None:
        parts += [cpu_limit(results, cores), sf_timers(results, cores)]
        parts += [env_server(results, rel, cores, v) for v in VARIANTS if v != "inprocess"]
    return " ".join(p for p in parts if p)
