"""One bench-crafter variant: Sample Factory APPO on Crafter's own reward (achievement unlocks and the health
term, the env's ``native`` reward) for the frame budget, through env servers as the learner runs a job.

The job directory lives under ``--work`` and is kept: running the same variant again resumes its training from
the last checkpoint (Sample Factory's resume) and keeps appending to its episode log, so a run interrupted at
any point goes on where it stopped. Every training episode is logged (``sf_env.episode_log``); those that ended
within the budget are kept, per episode, in the raw results, and the report computes the rates and the score from
them, as Crafter's protocol counts training episodes. The held-out evaluation plays the worlds of bench-game's set
``--eval-set`` of a run with the same seed, so that an APPO row and that run's RL-GPT row pair world by world.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from pathlib import Path
from typing import Any

from rich.progress import Progress

from benchmarks.game.raw import episode_records
from benchmarks.game.sets import WorldRange, declared_set
from benchmarks.training import follow_training, launch_training, stop_training
from rlgpt import worlds
from rlgpt.app.launcher import ServiceProcess, start_service
from rlgpt.game_score import within_budget
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2
from services.env_server.skills.reference import REFERENCE_SKILLS
from services.learner.env_servers import prepare_env_servers
from services.learner.jobs import LocalHandle, prepare_job_dir, read_progress

log = logging.getLogger("benchmarks.crafter")
EPISODE_LENGTH = 10_000
"""Crafter's own episode length (its default ``length``)."""
NUM_WORKERS, ENVS_PER_WORKER = 2, 8
VARIANTS = ("appo", "reference-skills", "library-skills")
"""Primitives only; with the hand-written reference skills; with the skills an RL-GPT run's library holds
(``--library``). Skills are macro actions of up to K frames next to the primitives."""


def load_library(path: Path) -> dict[str, str]:
    """Name -> code of the skills in a planner skill library (the JSON an RL-GPT run leaves, e.g.
    runs/skill_library.json); ValueError when it holds none."""
    entries = json.loads(path.read_text())
    skills = {str(e["name"]): str(e["code"]) for e in entries if e.get("name") and e.get("code")}
    if not skills:
        raise ValueError(f"{path}: no skills in this library")
    return skills


def variant_skills(variant: str, library: dict[str, str] | None) -> dict[str, str]:
    if variant == "reference-skills":
        return dict(REFERENCE_SKILLS)
    if variant == "library-skills":
        if not library:
            raise ValueError("the library-skills variant needs --library (a planner skill library JSON)")
        return dict(library)
    return {}


def crafter_config(variant: str, frames: int, seed: int, skills: tuple[str, ...]) -> learner_pb2.RLConfig:
    """The whole open-ended game (no success condition ends an episode) on the game's own reward."""
    return learner_pb2.RLConfig(
        name=f"crafter-{variant}", backend="crafter", task=common_pb2.TaskSpec(),
        reward_terms=[common_pb2.RewardTerm(kind="native", weight=1.0)], episode_length=EPISODE_LENGTH,
        env_frames=frames, num_workers=NUM_WORKERS, envs_per_worker=ENVS_PER_WORKER, seed=seed,
        skills=list(skills), skill_max_steps=32 if skills else 1)


def read_episodes(job_dir: Path) -> list[dict[str, Any]]:
    """Every logged training episode in the order they ended, each with ``end_frame``: the frames of all
    episodes that ended up to it (a lower bound of the training's frame count then)."""
    episodes = [json.loads(line) for path in sorted((job_dir / "episodes").glob("*.jsonl"))
                for line in path.read_text().splitlines() if line.strip()]
    episodes.sort(key=lambda e: e["time"])
    total = 0
    for episode in episodes:
        total += int(episode["frames"])
        episode["end_frame"] = total
    return episodes


def training_seconds(progress: list[dict[str, Any]]) -> float:
    """Training time over every invocation of a job (each training process counts its own elapsed from 0)."""
    total, last = 0.0, 0.0
    for record in progress:
        if record["elapsed"] < last:
            total += last
        last = record["elapsed"]
    return total + last


def training_span(progress: list[dict[str, Any]]) -> dict[str, Any]:
    """When a job trained: its first and last progress records (UTC) and how many training invocations wrote them
    (a resumed job starts its elapsed time from 0 again), so that a section measured on one day says when the
    frames it reports were trained."""
    if not progress:
        return {}
    resumed = sum(b["elapsed"] < a["elapsed"] for a, b in itertools.pairwise(progress))
    stamp = "%Y-%m-%d %H:%M UTC"
    return {"from_utc": time.strftime(stamp, time.gmtime(progress[0]["time"])),
            "to_utc": time.strftime(stamp, time.gmtime(progress[-1]["time"])), "invocations": resumed + 1}


def training_record(episode: dict[str, Any]) -> dict[str, Any]:
    """A training episode as the raw results keep it: what it unlocked, its frames, the training's frames by its
    end, its return and how it ended."""
    return {"achievements": list(episode["achievements"]), "frames": int(episode["frames"]),
            "end_frame": int(episode["end_frame"]), "return": round(float(episode["return"]), 3),
            "end": episode.get("end_reason", "")}


def trained_frames(job_dir: Path) -> int:
    """The env frames the job has trained (its progress records)."""
    return max((r["env_frames"] for r in read_progress(job_dir)), default=0)


def summarise(job_dir: Path, budget: int) -> dict[str, Any]:
    """The training's episodes that ended within the budget (per episode: the report computes the rates and the
    score from them alone), its frames and its training time."""
    episodes = within_budget(read_episodes(job_dir), budget)
    progress = read_progress(job_dir)
    frames = trained_frames(job_dir)
    return {"frames": frames, "complete": frames >= budget, "train_s": training_seconds(progress),
            "episodes": [training_record(e) for e in episodes]}


def start_env_servers(count: int, logs: Path, skills: dict[str, str], config: learner_pb2.RLConfig,
                      session_envs: int = 0, code: Path | None = None) -> tuple[list[ServiceProcess], list[str]]:
    """``count`` env servers (one per rollout worker) holding the variant's skills; the achievement names from
    the first one's Describe (the game's own list). ``session_envs``: the most envs one session may hold
    (``RLGPT_ENV_MAX_ENVS_PER_SESSION``); 0: the server's default. ``code``: a checkout whose env server (and
    sandbox) to run instead of this one's (bench-validate's arms)."""
    env = {"RLGPT_ENV_MAX_ENVS_PER_SESSION": str(session_envs)} if session_envs else {}
    if code is not None:
        code = code.resolve()
        env["PYTHONPATH"] = str(code)
    env = env or None
    servers = [start_service("env", logs.resolve(), metrics_port=-1, env=env, cwd=code) for _ in range(count)]
    channel = create_channel(servers[0].target, default_timeout=120, wait_ready_seconds=60)
    try:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        for name, code in skills.items():
            stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))
        prepare_env_servers([s.target for s in servers], servers[0].target, stub, config)
        achievements = list(stub.Describe(env_pb2.DescribeRequest(backend="crafter")).achievements)
    finally:
        channel.close()
    return servers, achievements


def eval_worlds(seed: int, eval_set: int, episodes: int, frames: int) -> WorldRange:
    """The held-out worlds: bench-game's set ``eval_set`` of a seed-``seed`` run (``worlds.game_bench_worlds``);
    ValueError when a training worker's worlds (``worlds.training_worlds``, fewer than ``frames`` + its envs) could
    reach them (with 2 workers only beyond ~5M frames)."""
    wanted = declared_set(seed, eval_set, episodes)
    for worker in range(NUM_WORKERS):
        first = worlds.training_worlds(seed, worker)
        training = WorldRange(f"training worker {worker}", first, first + frames + ENVS_PER_WORKER)
        if training.overlaps(wanted):
            raise ValueError(f"{wanted.purpose} (worlds {wanted.first:,}..{wanted.last:,}) overlaps {training.purpose}"
                             f"'s worlds ({training.first:,}..{training.last:,}) at {frames:,} frames")
    return wanted


def held_out(job_dir: Path, target: str, episodes: int, seed: int, eval_set: int = 0) -> dict[str, Any]:
    """The trained policy on ``episodes`` worlds it never trained on: bench-game's set ``eval_set`` of a run with
    this seed (:func:`eval_worlds`), per episode."""
    from services.learner.evaluate import evaluate

    first = declared_set(seed, eval_set, episodes).first
    response = evaluate(job_dir, target, episodes, first, max_frames=episodes * EPISODE_LENGTH, sampling_seed=seed)
    return {"first_seed": first, "set": eval_set, "run_seed": seed,
            "episodes": episode_records(response.episodes, first)}


def train_job(job_dir: Path, config: learner_pb2.RLConfig, servers: list[ServiceProcess], timeout: float,
              progress: Progress, label: str) -> int | None:
    """Trains (or resumes) the job in ``job_dir`` up to ``config.env_frames`` as the learner would (its local runner,
    its sessions on ``servers``), with live progress; returns its exit code, None when ``timeout`` ended it (with a
    checkpoint to resume from). A job trained to its budget already is not trained again."""
    frames = int(config.env_frames)
    handle: LocalHandle | None = None
    task = progress.add_task(label, total=frames)
    prepare_job_dir(job_dir, config, {"env_server": servers[0].target, "env_servers": [s.target for s in servers],
                                      "device": "cpu", "progress_interval": 5, "record_episodes": True})
    records = read_progress(job_dir)
    if records and records[-1]["env_frames"] >= frames:  # trained already: only summarise (and evaluate)
        log.info("%s: trained already (%d frames); not training again", label, records[-1]["env_frames"])
        progress.update(task, visible=False)
        return 0

    def show(last: dict[str, Any]) -> None:
        progress.update(task, completed=min(frames, last["env_frames"]),
                        description=f"{label}: {last['fps']:.0f} frames/s, {last['episodes']} episodes")

    try:
        handle = launch_training(job_dir, config)
        rc = follow_training(handle, job_dir, timeout, show, interval=2)
        if rc is None:
            log.warning("%s: stopped after %.0f s (--timeout); run it again to resume", label, timeout)
        return rc
    finally:
        if handle is not None:
            stop_training(handle, job_dir, grace=60)  # a clean stop saves a checkpoint to resume from
        progress.update(task, visible=False)


def run_variant(variant: str, work: Path, frames: int, seed: int, timeout: float, progress: Progress,
                eval_episodes: int = 0, library: dict[str, str] | None = None, eval_set: int = 0) -> dict[str, Any]:
    """Trains (or resumes) one variant up to ``frames``, summarises its episodes and, with ``eval_episodes``,
    scores the trained policy on held-out worlds (bench-game's set ``eval_set`` of a run with this seed)."""
    skills = variant_skills(variant, library)
    job_dir = work / variant
    job_dir.mkdir(parents=True, exist_ok=True)
    config = crafter_config(variant, frames, seed, tuple(skills))
    if eval_episodes:
        eval_worlds(seed, eval_set, eval_episodes, frames)  # before training: held-out worlds no worker may reach
    started = time.time()
    servers, achievements = start_env_servers(NUM_WORKERS, work / "logs", skills, config)
    try:
        rc = train_job(job_dir, config, servers, timeout, progress, variant)
        evaluation = None
        if eval_episodes and trained_frames(job_dir) >= frames:
            evaluation = held_out(job_dir, servers[0].target, eval_episodes, seed, eval_set)
        elif eval_episodes:  # a policy stopped short of its budget is not the benchmark's: scored once it is trained
            log.info("%s: not evaluated on held-out worlds: trained %d of %d frames (run again to resume)", variant,
                     trained_frames(job_dir), frames)
    finally:
        for server in servers:
            server.stop()
    summary = summarise(job_dir, frames)
    summary["held_out"] = evaluation
    summary.update(variant=variant, skills=list(skills), achievements=achievements, budget=frames,
                   wall_s=time.time() - started, rc=rc, job_dir=str(job_dir))
    return summary
