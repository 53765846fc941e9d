"""bench-env's section of BENCHMARKS.md, built only from a run's raw results (``run.run_benchmark``'s dict)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.common import fmt_pct, fmt_rate, machine_line, markdown_table
from benchmarks.env.numbers import outside_handler, rate, ratios
from benchmarks.env.reading import envs_text, reading

SECTION_TITLE = "## Env server throughput (make bench-env)"


def header(results: dict[str, Any]) -> list[str]:
    m, st = results["machine"], results["settings"]
    return [
        machine_line(results["date_utc"], m, ("grpcio", "protobuf", "crafter")) + "; "
        f"envs per session: {', '.join(map(str, m['envs']))}; load average at start "
        f"{m['load_average'][0]:.2f}. Client and server share the machine.",
        "",
        "Every path replays the same seeds and the same pre-generated random actions for the same number of "
        f"steps (after a warm-up of about {st['warmup_frames']} frames), with autoreset on death, so each does the "
        "same Crafter work. *In-process* steps `CrafterBackend` envs one after another in this process, as the "
        "server does. *gRPC* talks to `rlgpt serve env` in a separate process over loopback: unary `Step`, and "
        "`StreamSteps` with the next request sent only after the previous response arrived (lockstep, as an "
        f"actor that needs the observation). The timed steps are cut into {st['rounds']} slices run round-robin "
        "across the paths, so drifting background load hits all paths alike. frames/s = envs x steps / seconds.",
    ]


def throughput_table(results: dict[str, Any], rel: dict[int, dict[str, float]]) -> list[str]:
    rows = [(envs, fmt_rate(rate(results, "in_process", envs)), fmt_rate(rate(results, "grpc_unary", envs)),
             fmt_pct(rel[envs].get("grpc_unary")), fmt_rate(rate(results, "grpc_stream_lockstep", envs)),
             fmt_pct(rel[envs].get("grpc_stream_lockstep"))) for envs in results["machine"]["envs"]]
    return markdown_table(("envs", "in-process frames/s", "gRPC unary frames/s", "ratio", "gRPC stream frames/s",
                           "ratio"), rows, "rrrrrr")


def extra_paths(results: dict[str, Any], rel: dict[int, dict[str, float]]) -> list[str]:
    counts = results["machine"]["envs"]
    extras = [f"Reference: plain `crafter.Env` (no wrapper) at {envs_text([envs])}: "
              f"{fmt_rate(value)} frames/s." for envs in counts if (value := rate(results, "raw_crafter", envs))]
    for path, title in (("grpc_stream_pipelined", "StreamSteps pipelined (each slice's requests offered at once)"),
                        ("grpc_unary_pinned", "Diagnostic, unary `Step` with every server thread pinned to one "
                                              "core during its slices")):
        if any(rate(results, path, envs) for envs in counts):
            extras.append(f"{title}: " + ", ".join(f"{envs_text([envs])} {fmt_rate(rate(results, path, envs))} "
                                                    f"({fmt_pct(rel[envs].get(path))})" for envs in counts) + ".")
    return [" ".join(extras), ""] if extras else []


def per_frame_table(results: dict[str, Any]) -> list[str]:
    rows = []
    for envs in results["machine"]["envs"]:
        pipe = results["measurements"].get(f"server_pipeline/{envs}")
        unary = results["measurements"].get(f"grpc_unary/{envs}")
        base = rate(results, "in_process", envs)
        if not (pipe and base and unary):
            continue
        frames, extra = envs * pipe["steps"], pipe["extra"]
        handler_s = unary["extra"].get("server_handler_s")
        outside = " / ".join(fmt_pct(outside_handler(results["measurements"].get(f"{path}/{envs}")))
                             for path in ("grpc_unary", "grpc_stream_lockstep"))
        rows.append((envs, f"{1e6 / base:,.0f}", f"{1e6 * extra['session_step_s'] / frames:,.0f}",
                     f"{1e6 * extra['response_build_s'] / frames:,.1f}", f"{1e6 * extra['serialize_s'] / frames:,.1f}",
                     f"{1e6 * extra['parse_s'] / frames:,.1f}", f"{1e6 / pipe['frames_per_s']:,.0f}",
                     f"{1e6 / unary['frames_per_s']:,.0f}",
                     f"{1e6 * handler_s / frames:,.0f}" if handler_s is not None else "-", outside))
    return [
        "Where the time per frame goes, in microseconds per frame. *Server work* replays what `Step` runs "
        "(`Session.step` with its task bookkeeping, response building, `SerializeToString`) plus the client's "
        "parse, in one process without transport. *In handler* is the time the server itself spent inside `Step` "
        "during the gRPC unary run (its `rlgpt_env_step_seconds` histogram); *outside* is the share of the gRPC "
        "round trip spent elsewhere: transport, serialization in gRPC, thread hand-offs, the client.", "",
        *markdown_table(("envs", "backend env only", "Session.step (incl. env)", "response build", "serialize",
                         "parse", "server work total", "gRPC unary", "of it in handler",
                         "outside handler, unary / stream"), rows, "r" * 10)]


def cpu_table(results: dict[str, Any], rel: dict[int, dict[str, float]]) -> list[str]:
    rows = []
    for envs in results["machine"]["envs"]:
        local = results["measurements"].get(f"in_process/{envs}")
        unary = results["measurements"].get(f"grpc_unary/{envs}")
        if not (local and unary):
            continue
        lx, ux = local["extra"], unary["extra"]
        rows.append((envs, f"{lx['client_cpu_util']:.2f} / {lx['client_runq_wait_util']:.2f} / "
                           f"{lx['other_cpu_util']:.2f}",
                     f"{ux['server_cpu_util']:.2f} + {ux['client_cpu_util']:.2f} / "
                     f"{ux['server_runq_wait_util'] + ux['client_runq_wait_util']:.2f} / {ux['other_cpu_util']:.2f}",
                     fmt_pct(rel[envs].get("grpc_unary:adjusted")),
                     fmt_pct(rel[envs].get("grpc_stream_lockstep:adjusted")),
                     f"{fmt_pct(rel[envs].get('grpc_unary:median_slice'))} / "
                     f"{fmt_pct(rel[envs].get('grpc_stream_lockstep:median_slice'))}"))
    return [
        "CPU and contention while timed (cores; *others* = every other process on the machine; *waiting* = our "
        "processes runnable but without a core, from `/proc/*/schedstat`; the adjusted ratios take that waiting "
        "out of both sides and are an estimate for an otherwise idle machine; the slice median pairs each gRPC "
        "slice with the in-process slice of the same round):", "",
        *markdown_table(("envs", "in-process CPU / waiting / others", "unary server + client CPU / waiting / others",
                         "unary ratio adjusted", "stream ratio adjusted", "slice-median ratio unary / stream"),
                        rows, "rrrrrr")]


def memory_lines(results: dict[str, Any]) -> list[str]:
    mem = results.get("memory", {})
    server, local = mem.get("server"), mem.get("in_process")
    if not (server and local):
        return []
    lines = [f"Memory per env ({server['envs']} envs, RSS after creating the session minus before, / envs): "
             f"server process {server['mib_per_env']:.2f} MiB/env; in-process {local['mib_per_env']:.2f} MiB/env."]
    peak = mem.get("session_peak")
    if peak:
        lines[0] += (f" Peak memory of one session of {peak['envs']} envs (the server's RSS while it was created "
                     f"and stepped {peak['steps']} times with random actions, minus before): "
                     f"{peak['peak_mib']:.1f} MiB ({peak['created_mib']:.1f} MiB right after creating it).")
    return [*lines, ""]


def profile_lines(prof: dict[str, Any] | None) -> list[str]:
    if not (prof and prof.get("shares")):
        return []
    how = ("sampled; shares of the samples of busy server threads, each sample charged to the most specific part "
           "on its stack; C code such as gRPC core or upb counts under its Python caller):" if prof["tool"] == "py-spy"
           else f"profiled; shares of the Step handler's time, which was {prof.get('handler_share_of_wall', 0):.0%} "
                "of the wall time; gRPC's own threads and serialization are not visible to cProfile here):")
    lines = [f"Where the server's time goes ({prof['envs']} envs, unary Step, {prof['tool']}"
             + "".join(f" {flag}" for flag in prof.get("py_spy_flags", []))
             + f", {prof['seconds']} s, {fmt_rate(prof['frames_per_s_while_profiling'])} frames/s while {how}", "",
             *markdown_table(("part", "share"), [(name, f"{share:.1%}") for name, share in prof["shares"].items()
                                                 if share >= 0.005]), ""]
    threads = prof.get("thread_cpu_util")
    if threads:
        lines += ["Server CPU by thread over that window (100% = one core): " + ", ".join(
            f"{name} {util:.0%}" for name, util in sorted(threads.items(), key=lambda kv: -kv[1])) + ".", ""]
    return lines


def render_section(results: dict[str, Any]) -> str:
    rel = ratios(results)
    lines = [SECTION_TITLE, "", *header(results), "", *throughput_table(results, rel), "",
             *extra_paths(results, rel), *per_frame_table(results), "", *cpu_table(results, rel), "",
             *memory_lines(results), *profile_lines(results.get("profile")), reading(results, rel), ""]
    return "\n".join(lines)


def print_summary(results: dict[str, Any]) -> None:
    rel = ratios(results)
    table = Table(title="Crafter frames/s")
    paths = ("in_process", "server_pipeline", "grpc_unary", "grpc_stream_lockstep", "grpc_stream_pipelined",
             "grpc_unary_pinned")
    table.add_column("envs", justify="right")
    for path in paths:
        table.add_column(path, justify="right")
    for envs in results["machine"]["envs"]:
        table.add_row(str(envs), *(fmt_rate(rate(results, path, envs)) + (
            f" ({fmt_pct(rel[envs].get(path))})" if path in rel[envs] else "") for path in paths))
    Console().print(table)
