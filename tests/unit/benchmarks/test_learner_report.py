"""bench-learner's report is built from a run's numbers alone: other numbers, other sentences."""

from __future__ import annotations

from typing import Any

from benchmarks.learner.reading import cpu_limit, env_server, ratios, reading
from benchmarks.learner.report import SECTION_TITLE, render_section

SF_PROFILE = {"runner/main_loop": 100.0, "rollout_workers_reported": 2, "rollout/env_step": 80.0,
              "rollout/enqueue_policy_requests": 10.0, "inference/forward": 20.0, "learner/train": 30.0,
              "learner/update": 15.0}


def raw(fps: float, processes: int) -> dict[str, Any]:
    return {"processes": processes, "frames_per_s": fps, "cpu_ms_per_frame": 1000 * processes / fps,
            "parts": [{"cpu_util": 1.0}] * processes, "load_average_start": [0.2, 0.2, 0.2], "others_cpu_util": 0.05}


def training(fps: float, training_cpu: float, server_cpu: float | None = None) -> dict[str, Any]:
    steady = {"training": training_cpu, "others": 0.05} | ({"env_server": server_cpu} if server_cpu else {})
    return {"fps_second_half": fps, "fps_overall_wall": 0.8 * fps, "load_average_start": [0.3, 0.3, 0.3],
            "others_cpu_util": 0.05, "steady_cpu_util": steady,
            "cpu_ms_per_frame": 1000 * (training_cpu + (server_cpu or 0.0)) / fps,
            "peak_rss_mib": {"training": 2000.0} | ({"env_server": 300.0} if server_cpu else {}),
            "peak_pss_mib": {"training": 900.0}, "sf_profile_summary": SF_PROFILE}


def results(local_fps: float, remote_fps: float, remote_cpu: float = 1.9, two_fps: float | None = None
            ) -> dict[str, Any]:
    """Raw stepping at 1,000 frames/s on 2 cores; in-process training keeps 1.9 cores busy; training through 2 env
    servers runs at ``two_fps`` (the one-server rate when not given)."""
    return {
        "date_utc": "2026-01-01 00:00 UTC",
        "machine": {"cpu_model": "Test CPU", "cpu_count": 2, "ram_gib": 8.0, "python": "3.11", "torch": "2",
                    "sample_factory": "2", "grpcio": "1", "crafter": "1.8"},
        "settings": {"num_workers": 2, "envs_per_worker": 4, "episode_length": 1000, "frames_budget": 30000,
                     "raw_seconds": 15.0, "max_others_cpu": 0.15, "redo": 2,
                     "sf_argv": ["--rollout=32", "--batch_size=128", "--worker_num_splits=2"]},
        "raw_1": raw(600.0, 1), "raw_2": raw(1000.0, 2),
        "inprocess": training(local_fps, 1.9),
        "env_server": training(remote_fps, remote_cpu - 0.5, 0.5),
        "env_servers_2": training(two_fps or remote_fps, remote_cpu - 0.5, 0.5),
    }


def test_goals_met_or_not_follow_the_rates() -> None:
    assert reading(results(600, 400, two_fps=570)).startswith(
        "**In-process training reached 60.0% of raw 2-process stepping: the goal of >= 55% is met.** **Training "
        "through env servers at >= 90% of the in-process rate: met by training through 2 env servers (95.0%); not "
        "by training through one env server (66.7%).**")
    assert reading(results(500, 400)).startswith(
        "**In-process training reached 50.0% of raw 2-process stepping: the goal of >= 55% is not met.** **Training "
        "through env servers at >= 90% of the in-process rate: not met (training through one env server (80.0%) "
        "and training through 2 env servers (80.0%)).**")


def test_env_server_faster_or_slower_than_in_process() -> None:
    slower, faster = results(500, 400), results(400, 500)
    assert env_server(slower, ratios(slower), 2, "env_server").startswith(
        "Training through one env server is slower than in-process training (80% of its rate)")
    assert env_server(faster, ratios(faster), 2, "env_server").startswith(
        "Training through one env server is faster than in-process training (125% of its rate)")


def test_cpu_bound_or_waiting_is_decided_by_the_busy_cores() -> None:
    bound, idle = results(500, 400, remote_cpu=1.95), results(500, 400, remote_cpu=1.0)
    assert "; its processes kept 1.95 of the 2 cores busy" in env_server(bound, ratios(bound), 2, "env_server")
    assert "so CPU per frame is what limits it" in env_server(bound, ratios(bound), 2, "env_server")
    assert ("it was not CPU-bound: the other 1.00 went to other processes (0.05) or sat idle (0.95) while it "
            "waited") in env_server(idle, ratios(idle), 2, "env_server")
    # In-process: 1.9 cores busy at 3.80 ms per frame; 2 cores could give 526 frames/s, 53% of raw stepping.
    assert cpu_limit(results(500, 400), 2) == (
        "Raw stepping kept 2.00 of the 2 cores busy at 2.00 ms of CPU per frame; in-process training costs 3.80 ms "
        "of CPU per frame (1.9x), so with all 2 cores busy it could reach about 53% of raw stepping. Its processes "
        "kept 1.90 cores busy (at least 90% of them), so CPU per frame is what limits it.")


def test_a_failed_run_is_said_so() -> None:
    failed = results(500, 400)
    failed["env_server"]["fps_second_half"] = None
    text = reading(failed)
    assert text.startswith("**A training run failed, so the goals could not be checked**; see the raw JSON and "
                           "training logs.")
    assert "through one env server" not in text  # the in-process run is still read; the failed one is not


def test_section_is_rendered_from_the_data() -> None:
    section = render_section(results(500, 400))
    assert section.startswith(SECTION_TITLE)
    assert "| APPO training, env in-process | 500 (400) | 50% | 2,000 MiB | 0.30 | 5% |" in section
    assert "| raw Crafter stepping, 1 process | 600 | 60% | - | 0.20 | 5% |" in section
    assert ("Against in-process training: env-server training 80%, training via 2 env servers 80%."
            in section)
    assert "| APPO training via 2 env servers | 400 (320) | 40% | 2,000 MiB + server 300 MiB | 0.30 | 5% |" in section
    assert "rollout 32, batch 128" in section


def test_the_batch_is_told_with_its_minibatches_and_passes() -> None:
    from benchmarks.learner.report import batch_text

    def told(*argv: str) -> str:
        return batch_text({"sf_argv": list(argv)})

    assert told("--batch_size=512", "--num_batches_per_epoch=1", "--num_epochs=1") == "batch 512, 1 epoch"
    assert told("--batch_size=256", "--num_batches_per_epoch=2", "--num_epochs=3") == (
        "batch 512 in 2 minibatches of 256, 3 epochs")
    assert told("--batch_size=512") == "batch 512, 1 epoch"  # a run from before minibatches were passed
