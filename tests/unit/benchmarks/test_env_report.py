"""bench-env's report is built from a run's numbers alone: other numbers, other sentences."""

from __future__ import annotations

from typing import Any

from benchmarks.env.numbers import ratios
from benchmarks.env.reading import comparison, contention, crossing, per_call, pinned, reading
from benchmarks.env.report import SECTION_TITLE, render_section


def measurement(path: str, envs: int, fps: float, others: float = 0.1, spread: float = 0.02) -> dict[str, Any]:
    steps = 100
    extra = {"other_cpu_util": others, "client_cpu_util": 0.9, "client_runq_wait_util": 0.05}
    if path.startswith("grpc"):
        extra |= {"server_cpu_util": 0.8, "server_runq_wait_util": 0.05,
                  "server_handler_s": 0.7 * envs * steps / fps}
    if path == "server_pipeline":
        extra |= {"session_step_s": 0.08, "response_build_s": 0.01, "serialize_s": 0.001, "parse_s": 0.001}
    return {"path": path, "envs": envs, "warmup": 3, "steps": steps, "seconds": envs * steps / fps,
            "frames_per_s": fps, "extra": extra, "round_rates": [fps * (1 - spread / 2), fps * (1 + spread / 2)]}


def results(unary: dict[int, float], stream: float = 0.9, pinned_ratio: float | None = None,
            others: float = 0.1) -> dict[str, Any]:
    """A run at the env counts of ``unary`` (env count -> unary frames/s as a share of in-process's 1,000)."""
    paths = {"in_process": {e: 1.0 for e in unary}, "server_pipeline": {e: 0.95 for e in unary},
             "grpc_unary": unary, "grpc_stream_lockstep": {e: stream for e in unary}}
    if pinned_ratio is not None:
        paths["grpc_unary_pinned"] = {e: pinned_ratio for e in unary}
    return {
        "date_utc": "2026-01-01 00:00 UTC", "settings": {"warmup_frames": 400, "rounds": 2},
        "machine": {"cpu_model": "Test CPU", "cpu_count": 2, "ram_gib": 8.0, "python": "3.11", "grpcio": "1",
                    "protobuf": "5", "crafter": "1.8", "envs": sorted(unary), "load_average": [0.1, 0.1, 0.1]},
        "measurements": {f"{path}/{e}": measurement(path, e, 1000 * share, others)
                         for path, by_envs in paths.items() for e, share in by_envs.items()},
        "memory": {"server": {"envs": 16, "mib_per_env": 0.5}, "in_process": {"envs": 16, "mib_per_env": 0.4}},
        "profile": {"tool": "py-spy", "envs": 16, "seconds": 8, "frames_per_s_while_profiling": 900,
                    "shares": {"Crafter render (LocalView/ItemView, textures)": 0.6,
                               "Backend wrapper (vector, inventory, achievements)": 0.1,
                               "gRPC server machinery (Python + C-core)": 0.3}},
    }


def test_faster_and_slower_grpc_give_different_sentences() -> None:
    fast, slow = results({1: 0.5, 16: 1.1}), results({1: 0.5, 16: 0.6}, stream=0.6)
    fast_text, slow_text = reading(fast, ratios(fast)), reading(slow, ratios(slow))
    assert "faster than in-process at 16 envs (by 10%) and slower at 1 env (by 50%)" in fast_text
    assert "slower than in-process at 1 and 16 envs (by 50% and 40%)" in slow_text
    assert "**As measured, the goal (>= 85% of in-process throughput through gRPC at 16+ envs) is met**" in fast_text
    assert "is not met**" in slow_text


def test_goal_crossing_follows_the_ratios() -> None:
    rel = ratios(results({1: 0.5, 16: 0.9, 64: 0.8}))
    assert crossing(rel, "grpc_unary") == ("Unary `Step` first reaches 85% of in-process at 16 envs but falls below "
                                          "it again at 64 envs.")
    rel = ratios(results({1: 0.5, 16: 0.9, 64: 0.95}))
    assert crossing(rel, "grpc_unary").endswith("at 16 envs and stays there at every larger count.")
    rel = ratios(results({1: 0.5, 16: 0.7}))
    assert crossing(rel, "grpc_unary") == ("Unary `Step` stays below 85% of in-process at every count measured "
                                          "(best 70% at 16 envs).")
    assert comparison(ratios(results({16: 1.0})), "grpc_unary") == "Unary `Step` is as fast as in-process at 16 envs."


def test_pinning_is_judged_against_the_slice_spread() -> None:
    beyond = results({16: 0.8}, pinned_ratio=0.95)
    within = results({16: 0.8}, pinned_ratio=0.81)
    assert "so in this run pinning made a difference up beyond the noise" in pinned(beyond, ratios(beyond), [16])
    assert "so in this run pinning made no difference beyond the noise" in pinned(within, ratios(within), [16])
    assert pinned(results({16: 0.8}), ratios(results({16: 0.8})), [16]) == ""


def test_the_contention_estimate_only_on_a_busy_machine() -> None:
    quiet, busy = results({16: 0.8}, others=0.05), results({16: 0.8}, others=0.9)
    assert contention(quiet, ratios(quiet), [16]).startswith("Other processes used 0.05 of the 2 cores")
    assert "Taking that waiting out" not in contention(quiet, ratios(quiet), [16])
    # Waits of 0.1 (client + server) against 0.05 in-process: 80% / 0.9 * 0.95 = 84%.
    assert ("Taking that waiting out of both sides gives 16 envs: unary 84%, stream 95% (an estimate that ignores "
            "cache effects), which misses the goal.") in contention(busy, ratios(busy), [16])
    close = results({16: 0.82}, stream=0.9, others=0.9)
    assert contention(close, ratios(close), [16]).endswith("which meets the goal.")


def test_per_call_cost_sentence_follows_the_numbers() -> None:
    assert per_call(results({1: 0.5, 16: 0.9})).endswith("more envs per session lowered the cost per frame.")
    assert per_call(results({1: 0.9, 16: 0.5})).endswith("more envs per session did not lower the cost per frame.")
    assert per_call(results({16: 0.9})) == ""


def test_section_is_rendered_from_the_data() -> None:
    section = render_section(results({1: 0.5, 16: 0.9}))
    assert section.startswith(SECTION_TITLE)
    assert "| 16 | 1,000 | 900 | 90% | 900 | 90% |" in section
    assert "Inside the server, Crafter itself takes 70% of the busy time (rendering alone 60%)" in section
    assert "Memory per env (16 envs" in section
