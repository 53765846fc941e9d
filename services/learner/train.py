"""One training job: ``python -m services.learner.train JOB_DIR``.

Runs Sample Factory APPO on the env server named in ``JOB_DIR/config.json`` and writes a progress
record (JSON line) to ``JOB_DIR/progress.jsonl`` every few seconds. Frames are counted as the env
consumed them (skill actions take up to K frames each, a chain prefix its own), by the rollout workers' envs
(``frame_budget``), which stop stepping at the frame budget; training stops there or when ``JOB_DIR/stop``
appears, saving a checkpoint either way.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

import numpy as np
from sample_factory.algo.runners.runner import AlgoObserver, Runner
from sample_factory.algo.utils.context import global_model_factory
from sample_factory.algo.utils.misc import ExperimentStatus
from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
from sample_factory.envs.env_utils import register_env
from sample_factory.train import make_runner

from rlgpt.v1 import learner_pb2
from services.learner.frame_budget import spent_frames
from services.learner.job_watch import DEFAULT_STOP_GRACE, JobWatch, exit_later, pid_alive
from services.learner.jobs import LEARNER_PID_ENV
from services.learner.model import make_actor_critic, make_encoder
from services.learner.rl_config import epochs, minibatches, worker_splits
from services.learner.sf_env import ENV_NAME, load_job_config, make_sf_env
from services.learner.vec_env import CHOICES, choice_action

log = logging.getLogger(__name__)
ROLLOUT = 32
EXTRA_PREFIX = "episode_extra_stats/"


SF_DEVICES = {"cpu": "cpu", "cuda": "gpu"}
"""Sample Factory's name (its --device) for each torch device a job may train on."""


def job_device(config: learner_pb2.RLConfig, doc: dict[str, Any]) -> str:
    """The torch device a job trains on: CUDA when its config asks for the GPU (a Kubernetes Job that requested
    one, or a learner on a GPU machine), else the learner's device from the job's config.json."""
    return "cuda" if config.gpu else str(doc.get("device", "cpu"))


def sf_argv(config: learner_pb2.RLConfig, job_dir: Path, device: str) -> list[str]:
    """Sample Factory arguments for a job: small CPU-friendly APPO, no RNN, resumable.

    Batched sampling: each split of a rollout worker is one vector env of ``envs_per_worker / splits`` envs
    (``vec_env.SessionVecEnv``), so Sample Factory's ``num_envs_per_worker`` counts splits (``worker_splits``).
    """
    workers, envs = config.num_workers, config.envs_per_worker
    splits = worker_splits(envs, device)
    parts = minibatches(config, device)  # a config's own is validated: it divides the batch's trajectories
    argv = [
        f"--env={ENV_NAME}", f"--experiment={job_dir.name}", f"--train_dir={job_dir / 'sf'}",
        f"--device={SF_DEVICES[device]}", "--batched_sampling=True", f"--num_workers={workers}",
        f"--num_envs_per_worker={splits}", f"--worker_num_splits={splits}",
        f"--rollout={ROLLOUT}", f"--batch_size={max(ROLLOUT * workers * envs // splits, ROLLOUT) // parts}",
        f"--num_batches_per_epoch={parts}", f"--num_epochs={epochs(config)}", "--use_rnn=False",
        "--normalize_input=False",
        f"--train_for_env_steps={config.env_frames}", "--save_every_sec=15", "--keep_checkpoints=2",
        "--restart_behavior=resume", f"--seed={config.seed}", "--decorrelate_envs_on_one_worker=False",
        "--experiment_summaries_interval=5", "--stats_avg=100", "--with_wandb=False",
        "--save_best_every_sec=1000000", "--set_workers_cpu_affinity=False", f"--rlgpt_job_dir={job_dir}",
    ]
    if config.learning_rate:
        argv.append(f"--learning_rate={config.learning_rate}")
    if config.plan_prior:
        argv.append(f"--rlgpt_plan_prior={config.plan_prior}")
    return argv


def parse_cfg(argv: list[str], evaluation: bool = False) -> Any:
    parser, _ = parse_sf_args(argv, evaluation=evaluation)
    parser.add_argument("--rlgpt_job_dir", type=str, required=True, help="rlgpt job directory")
    parser.add_argument("--rlgpt_plan_prior", type=float, default=0.0,
                        help="starting probability of the plan action (the last action; 0: none set)")
    return parse_full_cfg(parser, argv)


def register_components() -> None:
    register_env(ENV_NAME, make_sf_env)
    global_model_factory().register_encoder_factory(make_encoder)
    global_model_factory().register_actor_critic_factory(make_actor_critic)


class ProgressObserver(AlgoObserver):
    """Counts frames from per-episode stats, writes progress records, enforces the frame budget and stop file,
    and stops the job itself when its env server is lost or its learner gone (``job_watch``)."""

    def __init__(self, job_dir: Path, frame_budget: int, interval: float, watch: JobWatch | None = None):
        self.job_dir = job_dir
        self.frame_budget = frame_budget
        self.interval = interval
        self.start = time.time()
        self.last_write = 0.0
        self.episodes = 0
        self.frames_done = 0.0
        self.decisions_done = 0.0
        self.skill_frames = 0.0
        self.skill_errors = 0
        self.returns: deque[float] = deque(maxlen=100)
        self.successes: deque[float] = deque(maxlen=100)
        self.choices: deque[dict[str, float]] = deque(maxlen=100)  # decisions per action of the last episodes
        self.rate: deque[tuple[float, float]] = deque(maxlen=30)
        self.reason = ""
        self.stopped = False
        self.terminated = False
        self.watch = watch

    def on_episode(self, runner: Runner, msg: dict[str, Any], policy_id: int) -> None:
        """One message per finished group of episodes (batched sampling: arrays over the finished envs, the
        env's extra stats under ``episode_extra_stats/NAME``)."""
        stats = msg["episodic"]
        rewards, lengths = np.atleast_1d(stats["reward"]), np.atleast_1d(stats["len"])
        extra = {key.split("/", 1)[1]: np.atleast_1d(value) for key, value in stats.items()
                 if key.startswith(EXTRA_PREFIX)}
        for k in range(len(rewards)):
            self.episodes += 1
            self.returns.append(float(rewards[k]))
            self.successes.append(float(extra["success"][k]) if "success" in extra else 0.0)
            self.frames_done += float(extra["frames"][k]) if "frames" in extra else float(lengths[k])
            self.decisions_done += float(lengths[k])
            self.skill_frames += float(extra["skill_frames"][k]) if "skill_frames" in extra else 0.0
            self.skill_errors += int(extra["skill_errors"][k]) if "skill_errors" in extra else 0
            self.choices.append({choice_action(key.removeprefix(CHOICES + "/")): float(value[k])
                                 for key, value in extra.items() if key.startswith(CHOICES + "/")})

    def frames(self, runner: Runner) -> int:
        """The job's env frames: the real count its vector envs keep (``frame_budget``, the one the budget holds
        them to); an env that keeps none (the benchmark's in-process one) gets an estimate, the decisions the
        learner consumed scaled by frames-per-decision of finished episodes."""
        spent = spent_frames(self.job_dir)
        if spent is not None:
            return spent
        decisions = sum(runner.env_steps.values())
        per_decision = self.frames_done / self.decisions_done if self.decisions_done else 1.0
        return int(max(self.frames_done, decisions * per_decision))

    def action_shares(self) -> dict[str, float]:
        """What the policy chose over the last episodes: each action's share of their decisions."""
        totals: Counter[str] = Counter()
        for episode in self.choices:
            totals.update(episode)
        decisions = sum(totals.values())
        return {name: round(n / decisions, 4) for name, n in totals.most_common() if n} if decisions else {}

    def record(self, runner: Runner, final: bool = False) -> dict[str, Any]:
        now = time.time()
        frames = self.frames(runner)
        self.rate.append((now, frames))
        t0, f0 = self.rate[0]
        fps = (frames - f0) / (now - t0) if now > t0 else 0.0
        lag = runner.policy_lag[0] if runner.policy_lag else {}
        record = {
            "time": now, "elapsed": now - self.start, "env_frames": frames, "fps": fps, "episodes": self.episodes,
            "mean_return": sum(self.returns) / len(self.returns) if self.returns else 0.0,
            "success_rate": sum(self.successes) / len(self.successes) if self.successes else 0.0,
            "policy_lag": float(lag.get("version_diff_avg", 0.0)),
            "skill_frame_fraction": self.skill_frames / self.frames_done if self.frames_done else 0.0,
            "skill_errors": self.skill_errors, "action_shares": self.action_shares(), "final": final,
            "reason": self.reason,
        }
        with (self.job_dir / "progress.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")
        self.last_write = now
        return record

    def on_training_step(self, runner: Runner, training_iteration_since_resume: int) -> None:
        if not self.stopped and time.time() - self.last_write >= self.interval:  # the final record stays last
            self.record(runner)
        self.check_budget(runner)

    def check_budget(self, runner: Runner) -> None:
        """Stops the job (a checkpoint first) at its frame budget or its stop file; the envs stopped stepping at
        the budget already, so the check after a training step or a summary comes in time."""
        if self.reason:
            return
        if self.frames(runner) >= self.frame_budget:
            self.reason = "budget"
        elif (self.job_dir / "stop").exists():
            self.reason = "stopped"
        if self.reason:
            runner._stop_training()  # saves a checkpoint, then stops every component

    def extra_summaries(self, runner: Runner, policy_id: int = 0, writer: Any = None, *args: Any) -> None:
        """Sample Factory calls this every few seconds on the runner's loop, trained or not (with the policy's
        TensorBoard writer): the job's curves by env frames, the job's self-watch, and a stop asked by a signal
        (:meth:`terminate`)."""
        if writer is not None:  # Sample Factory's own scalars are by decisions, a skill action's K frames one
            frames = self.frames(runner)
            writer.add_scalar("rlgpt/success_rate", sum(self.successes) / max(1, len(self.successes)), frames)
            writer.add_scalar("rlgpt/mean_return", sum(self.returns) / max(1, len(self.returns)), frames)
        self.check_budget(runner)  # envs past the budget idle: training steps may come slowly
        if self.reason:
            return
        reason = "stopped" if self.terminated else self.watch.check() if self.watch is not None else None
        if reason:
            log.error("stopping the training with a checkpoint: %s",
                      "asked by a signal" if self.terminated else self.watch.message)
            self.reason = reason
            # Stopping waits for every component; one that died with the env server could keep it waiting.
            exit_later(self.watch.stop_grace if self.watch else DEFAULT_STOP_GRACE, 3, lambda: self.on_stop(runner))
            runner._stop_training()  # saves a checkpoint, writes the final record, stops every component

    def terminate(self, signum: int, _frame: Any = None) -> None:
        """A SIGTERM handler (``kill PID``): the job stops as StopJob stops it, with a checkpoint, and its Sample
        Factory processes end with it instead of stepping on as orphans. Only a flag here: the runner's loop acts
        on it (:meth:`extra_summaries`)."""
        log.warning("signal %d: stopping the training", signum)
        self.terminated = True

    def on_stop(self, runner: Runner) -> None:
        if not self.stopped:
            self.stopped = True
            self.record(runner, final=True)


def trust_own_checkpoints() -> None:
    """Lets Sample Factory load the job's own checkpoints again. It calls ``torch.load`` without ``weights_only``,
    which torch >= 2.6 defaults to True; a checkpoint holding a numpy scalar (``best_performance`` once a best
    policy was saved) then fails to unpickle and Sample Factory silently trains from scratch. The variable reaches
    Sample Factory's learner process too (spawned children inherit the environment); calls that pass
    ``weights_only`` (ours) are unaffected."""
    os.environ.pop("TORCH_FORCE_WEIGHTS_ONLY_LOAD", None)
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"


def run_job(job_dir: Path, env_name: str = ENV_NAME) -> int:
    """Trains one job; ``env_name`` picks another registered Sample Factory env (benchmarks use an in-process one)."""
    trust_own_checkpoints()
    config, doc = load_job_config(job_dir)
    register_components()
    argv = [f"--env={env_name}" if arg.startswith("--env=") else arg
            for arg in sf_argv(config, job_dir, job_device(config, doc))]
    cfg = parse_cfg(argv)
    cfg, runner = make_runner(cfg)
    pid = os.environ.get(LEARNER_PID_ENV, "")
    watch = JobWatch.for_job(job_dir, doc, int(pid) if pid.isdigit() else None)
    observer = ProgressObserver(job_dir, config.env_frames, float(doc.get("progress_interval", 2.0)), watch)
    runner.register_observer(observer)
    runner.register_episodic_stats_handler(observer.on_episode)
    signal.signal(signal.SIGTERM, observer.terminate)  # this process only: Sample Factory spawns its workers
    status = runner.init()
    if status == ExperimentStatus.SUCCESS:
        status = runner.run()
    log.info("job %s ended with status %s (%s)", job_dir.name, status, observer.reason or "no reason")
    return exit_code(observer, runner, status)


def exit_code(observer: ProgressObserver, runner: Runner, status: int) -> int:
    """The job process's exit code once Sample Factory's loop ended, its final record written first: the loop can
    end before the stop callback ran (seen under load), and the learner judges a job by that record, so a job that
    trained its budget never exits without one."""
    if observer.reason and not observer.stopped:
        observer.on_stop(runner)
    if status != ExperimentStatus.SUCCESS:
        return 1
    return 0 if observer.reason in ("budget", "stopped") else 3


def watch_learner(pid: int, interval: float = 2.0, grace: float = 3 * DEFAULT_STOP_GRACE) -> None:
    """The backstop of the self-watch: ends this job's whole process group when the local learner that launched
    it has been gone for ``grace`` seconds (the runner stops itself with a checkpoint well before, unless hung)."""

    def watch() -> None:
        gone_since = None
        while True:
            time.sleep(interval)
            if pid_alive(pid):
                continue
            gone_since = gone_since or time.monotonic()
            if time.monotonic() - gone_since >= grace:
                log.error("the learner (pid %d) is gone; ending this training job", pid)
                os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="learner-watch").start()


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if os.environ.get(LEARNER_PID_ENV, "").isdigit():
        watch_learner(int(os.environ[LEARNER_PID_ENV]))
    if len(argv) != 2:
        print("usage: python -m services.learner.train JOB_DIR", file=sys.stderr)
        return 2
    return run_job(Path(argv[1]).resolve())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
