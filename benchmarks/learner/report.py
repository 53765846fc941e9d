"""bench-learner's section of BENCHMARKS.md, built only from a run's raw results (``run.run_benchmark``'s dict)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.common import fmt_mib, fmt_pct, fmt_rate, machine_line, markdown_table
from benchmarks.learner import VARIANTS
from benchmarks.learner.reading import ratios, reading

SECTION_TITLE = "## Learner training throughput (make bench-learner)"
VARIANT_LABELS = {"inprocess": "APPO training, env in-process", "env_server": "APPO training via env server",
                  "env_servers_2": "APPO training via 2 env servers"}
SHORT_LABELS = {"inprocess": "in-process training", "env_server": "env-server training",
                "env_servers_2": "training via 2 env servers"}


def sf_arg(settings: dict[str, Any], name: str) -> str:
    return next((a.split("=", 1)[1] for a in settings["sf_argv"] if a.startswith(f"--{name}=")), "?")


def batch_text(settings: dict[str, Any]) -> str:
    """The batch, its minibatches (one gradient step each) and passes over it, from the run's own argv."""
    size, parts, passes = (sf_arg(settings, name) for name in ("batch_size", "num_batches_per_epoch", "num_epochs"))
    if not parts.isdigit() or not size.isdigit():  # runs before 2026-11-28 passed one minibatch, one epoch
        return f"batch {size}, 1 epoch"
    return (f"batch {int(size) * int(parts)}" + (f" in {parts} minibatches of {size}" if int(parts) > 1 else "")
            + f", {passes} epoch{'s' if passes != '1' else ''}")


def header(results: dict[str, Any]) -> list[str]:
    m, st = results["machine"], results["settings"]
    return [
        machine_line(results["date_utc"], m, ("torch", "sample-factory", "grpcio", "crafter"))
        + ". Everything (envs, inference, learner, env server) shares these "
        f"{m['cpu_count']} cores.",
        "",
        f"Settings: Crafter task `collect_wood`, primitive actions only (frames == decisions), episode length "
        f"{st['episode_length']}; APPO through `services.learner.train` (`sf_argv`): {st['num_workers']} rollout "
        f"workers x {st['envs_per_worker']} envs (worker splits: {sf_arg(st, 'worker_num_splits')}), rollout "
        f"{sf_arg(st, 'rollout')}, {batch_text(st)}, no RNN, CPU; budget "
        f"{st['frames_budget']:,} env frames per run. *Raw stepping*: `CrafterBackend` envs ({st['envs_per_worker']} "
        f"per process) with random actions for {st['raw_seconds']:.0f} s, in 1 and in {st['num_workers']} "
        "processes. *In-process*: the learner's vector env over a local `Session` per rollout worker (what the "
        "server does per session, minus gRPC), trained through the same code as the learner's jobs. *Via env "
        "server*: `rlgpt serve env` plus `python -m services.learner.train`, as the learner service runs a job: "
        "Sample Factory's batched sampling, one session per rollout worker holding its envs, all of them stepped "
        "with one request over one `StreamSteps` call (`services/learner/vec_env.py`). *Via 2 env servers*: the "
        "same with two `rlgpt serve env` processes, worker w's session on server w mod 2, as a job given several "
        "env servers (`RLGPT_LEARNER_ENV_SERVERS`) runs. Training frames/s = env frames over the second half of "
        "the run (from `progress.jsonl`), so start-up is left out; the overall rate is in parentheses.",
    ]


def throughput_table(results: dict[str, Any], rel: dict[str, float | None]) -> list[str]:
    workers = results["settings"]["num_workers"]
    raw1, raw2 = results["raw_1"], results["raw_2"]
    rows = [("raw Crafter stepping, 1 process", fmt_rate(raw1["frames_per_s"]),
             fmt_pct(rel["raw2_vs_raw1"] and 1 / rel["raw2_vs_raw1"]), "-",
             f"{raw1['load_average_start'][0]:.2f}", fmt_pct(raw1["others_cpu_util"])),
            (f"raw Crafter stepping, {workers} processes", fmt_rate(raw2["frames_per_s"]), "100%", "-",
             f"{raw2['load_average_start'][0]:.2f}", fmt_pct(raw2["others_cpu_util"]))]
    for variant in VARIANTS:
        run = results[variant]
        rss = run.get("peak_rss_mib", {})
        servers = [value for name, value in sorted(rss.items()) if name.startswith("env_server")]
        mem = fmt_mib(rss.get("training")) + "".join(f" + server {fmt_mib(value)}" for value in servers)
        rows.append((VARIANT_LABELS[variant], f"{fmt_rate(run.get('fps_second_half'))} "
                     f"({fmt_rate(run.get('fps_overall_wall'))})", fmt_pct(rel[f"{variant}_vs_raw2"]), mem,
                     f"{run['load_average_start'][0]:.2f}", fmt_pct(run.get("others_cpu_util"))))
    return markdown_table(("variant", "frames/s", f"vs raw {workers}-process stepping", "peak RSS", "load at start",
                           "others' CPU"), rows)


def cpu_paragraph(results: dict[str, Any]) -> str:
    """CPU per frame over the steady window (the FPS's window): what each variant spends for one frame."""
    raw2 = results["raw_2"]
    bits = [f"raw stepping {raw2['cpu_ms_per_frame']:.2f} ms (the {raw2['processes']} processes used "
            f"{sum(p['cpu_util'] for p in raw2['parts']):.0%})"] if raw2.get("cpu_ms_per_frame") else []
    for variant in VARIANTS:
        run = results[variant]
        steady = run.get("steady_cpu_util", {})
        if not run.get("cpu_ms_per_frame"):
            continue
        used = f"training processes {steady.get('training', 0.0):.0%}" + "".join(
            f" + env server {value:.0%}" for name, value in sorted(steady.items()) if name.startswith("env_server"))
        bits.append(f"{SHORT_LABELS[variant]} {run['cpu_ms_per_frame']:.2f} ms ({used}, others "
                    f"{steady.get('others', 0.0):.0%})")
    return ("CPU time per frame over the same steady window as the frames/s (100% = one core): "
            + "; ".join(bits) + ".") if bits else ""


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
    st, rel = results["settings"], ratios(results)
    lines = [
        SECTION_TITLE, "", *header(results), "", *throughput_table(results, rel), "",
        "Against in-process training: " + ", ".join(
            f"{SHORT_LABELS[v]} {fmt_pct(rel[f'{v}_vs_inprocess'])}" for v in VARIANTS if v != "inprocess")
        + ". Peak RSS is summed over the "
        "training process tree (runner, learner, inference and rollout worker processes; shared libraries such as "
        "torch count once per process), polled every 0.5 s; peak PSS, which shares them out: "
        + ", ".join(f"{variant} {fmt_mib(results[variant].get('peak_pss_mib', {}).get('training'))}"
                    for variant in VARIANTS)
        + ". *Others' CPU* is what processes outside the benchmark used during the window (100% = one core); "
        + (f"a window above {st['max_others_cpu']:.0%} is redone up to {st['redo']} times." if st["redo"] else
           "windows were not redone in this run (--redo 0)."),
        "", cpu_paragraph(results), "",
        "Sample Factory's own profile (its end-of-run timing trees; seconds summed over the components of a kind, "
        "shares of the runner's main loop):", "",
        *(f"- {VARIANT_LABELS[variant]}: {profile_line(results[variant])}." for variant in VARIANTS),
    ]
    windows = (("raw 1 process", "raw_1"), (f"raw {st['num_workers']} processes", "raw_2"),
               *((SHORT_LABELS[variant], variant) for variant in VARIANTS))
    redone = [f"{label} ({len(results[key]['attempts'])} attempts)" for label, key in windows
              if len(results[key].get("attempts", [])) > 1]
    if redone:
        lines += ["", "Redone because other processes were busy: " + ", ".join(redone) + "."]
    lines += ["", reading(results), ""]
    return "\n".join(lines)


def print_summary(results: dict[str, Any]) -> None:
    rel = ratios(results)
    table = Table(title="Crafter frames/s: raw stepping vs. APPO training")
    for column in ("variant", "frames/s", "vs raw N-process", "others' CPU"):
        table.add_column(column, justify="right")
    for label, key in (("raw, 1 process", "raw_1"), ("raw, N processes", "raw_2")):
        table.add_row(label, fmt_rate(results[key]["frames_per_s"]), "-", fmt_pct(results[key]["others_cpu_util"]))
    for variant in VARIANTS:
        run = results[variant]
        table.add_row(VARIANT_LABELS[variant], fmt_rate(run.get("fps_second_half")),
                      fmt_pct(rel[f"{variant}_vs_raw2"]), fmt_pct(run.get("others_cpu_util")))
    Console().print(table)
