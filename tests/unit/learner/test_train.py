"""The training process's parts that run without a training: Sample Factory's arguments, the progress observer
(frames, records, budget and stop file), the command line and the watch on the learner that launched it.

A real Sample Factory training through a real env server is tests/integration/test_learner.py.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from sample_factory.algo.utils.misc import ExperimentStatus

from rlgpt.v1 import learner_pb2
from services.learner.sf_env import ENV_NAME
from services.learner.train import ROLLOUT, ProgressObserver, exit_code, main, sf_argv


def argv_of(job_dir: Path, **fields) -> dict[str, str]:
    config = learner_pb2.RLConfig(env_frames=5000, num_workers=2, envs_per_worker=4, seed=9, **fields)
    return dict(arg.removeprefix("--").split("=", 1) for arg in sf_argv(config, job_dir, "cpu"))


@pytest.mark.parametrize(("workers", "envs", "device", "splits", "batch"), [
    (2, 4, "cuda", 2, ROLLOUT * 2 * 4 // 2), (3, 3, "cuda", 1, ROLLOUT * 3 * 3), (1, 1, "cuda", 1, ROLLOUT),
    (4, 2, "cuda", 2, ROLLOUT * 4), (2, 4, "cpu", 1, ROLLOUT * 2 * 4)])
def test_sample_factory_arguments_follow_the_config(tmp_path: Path, workers: int, envs: int, device: str,
                                                    splits: int, batch: int) -> None:
    config = learner_pb2.RLConfig(env_frames=5000, num_workers=workers, envs_per_worker=envs, seed=9)
    args = dict(arg.removeprefix("--").split("=", 1) for arg in sf_argv(config, tmp_path / "job1", device))
    assert args["worker_num_splits"] == str(splits)  # double-buffered sampling only with an even env count
    assert args["batch_size"] == str(batch)
    # Batched sampling: each split is one vector env (a group of the worker's session), so SF counts splits.
    assert args["batched_sampling"] == "True"
    assert (args["num_workers"], args["num_envs_per_worker"]) == (str(workers), str(splits))
    assert args["env"] == ENV_NAME and args["experiment"] == "job1"
    assert args["device"] == {"cuda": "gpu", "cpu": "cpu"}[device]  # SF's name for CUDA is gpu
    assert args["train_dir"] == str(tmp_path / "job1" / "sf") and args["rlgpt_job_dir"] == str(tmp_path / "job1")
    assert args["train_for_env_steps"] == "5000" and args["seed"] == "9"
    assert args["use_rnn"] == "False" and args["restart_behavior"] == "resume"
    assert "learning_rate" not in args  # Sample Factory's default unless the config sets one
    assert (args["num_epochs"], args["num_batches_per_epoch"]) == ("1", "1")  # one pass, one step per batch


def test_a_learning_rate_is_passed_when_set(tmp_path: Path) -> None:
    assert float(argv_of(tmp_path, learning_rate=0.00025)["learning_rate"]) == pytest.approx(0.00025)


def test_a_bigger_batch_is_split_so_gradient_steps_per_frame_stay(tmp_path: Path) -> None:
    from services.learner.rl_config import MINIBATCH_TRAJECTORIES, minibatches

    # 2 workers x 16 envs: 32 trajectories a batch, two minibatches of 16 (as many steps per frame as 2 x 8).
    config = learner_pb2.RLConfig(env_frames=5000, num_workers=2, envs_per_worker=16, seed=9)
    args = dict(arg.removeprefix("--").split("=", 1) for arg in sf_argv(config, tmp_path / "job1", "cpu"))
    assert (args["batch_size"], args["num_batches_per_epoch"]) == (str(ROLLOUT * MINIBATCH_TRAJECTORIES), "2")
    small = learner_pb2.RLConfig(num_workers=2, envs_per_worker=8)
    assert minibatches(small, "cpu") == 1  # 16 trajectories: one minibatch
    assert minibatches(learner_pb2.RLConfig(num_workers=3, envs_per_worker=14), "cpu") == 2  # 42 = 2 x 21
    assert minibatches(learner_pb2.RLConfig(num_workers=2, envs_per_worker=16, num_minibatches=4), "cpu") == 4
    assert minibatches(learner_pb2.RLConfig(num_workers=2, envs_per_worker=16), "cuda") == 1  # 2 splits: 16
    assert minibatches(learner_pb2.RLConfig(num_workers=5, envs_per_worker=10), "cpu") == 2  # 50: 3 would not divide


class Runner:
    """What the observer reads of Sample Factory's runner (a real one needs a whole training)."""

    def __init__(self) -> None:
        self.env_steps = {0: 0}
        self.policy_lag = [{"version_diff_avg": 1.5}]
        self.stopped = 0

    def _stop_training(self) -> None:
        self.stopped += 1


def episode(reward: float, decisions: int, frames: int, success: float = 0.0, skill_frames: float = 0.0,
            skill_errors: float = 0.0) -> dict:
    """A message as batched sampling sends it for one finished env: its extra stats flattened by key path."""
    return {"episodic": {"reward": reward, "len": decisions, "episode_extra_stats/frames": frames,
                         "episode_extra_stats/success": success, "episode_extra_stats/skill_frames": skill_frames,
                         "episode_extra_stats/skill_errors": skill_errors}}


def records(job_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (job_dir / "progress.jsonl").read_text().splitlines()]


def test_frames_count_skill_frames_and_scale_unfinished_decisions(tmp_path: Path) -> None:
    observer, runner = ProgressObserver(tmp_path, frame_budget=10_000, interval=0.0), Runner()
    observer.on_episode(runner, episode(1.0, decisions=10, frames=40, success=1.0, skill_frames=30, skill_errors=2), 0)
    observer.on_episode(runner, episode(0.0, decisions=10, frames=10), 0)
    assert observer.frames(runner) == 50  # finished episodes' frames, before the runner counted decisions
    runner.env_steps = {0: 100}  # decisions consumed by the learner, 2.5 frames each so far
    assert observer.frames(runner) == 250
    record = observer.record(runner)
    assert record["env_frames"] == 250 and record["episodes"] == 2 and record["mean_return"] == 0.5
    assert record["success_rate"] == 0.5 and record["skill_frame_fraction"] == 30 / 50
    assert record["skill_errors"] == 2 and record["policy_lag"] == 1.5
    assert record["final"] is False and record["reason"] == ""
    assert records(tmp_path) == [record]


def test_one_message_of_several_finished_envs_counts_each_episode(tmp_path: Path) -> None:
    """Batched sampling reports the envs that finished in one step together, as arrays."""
    observer, runner = ProgressObserver(tmp_path, frame_budget=10_000, interval=0.0), Runner()
    observer.on_episode(runner, {"episodic": {
        "reward": np.array([1.0, 0.0, 2.0]), "len": np.array([10, 5, 5]),
        "episode_extra_stats/frames": np.array([40.0, 5.0, 5.0]),
        "episode_extra_stats/success": np.array([1.0, 0.0, 1.0]),
        "episode_extra_stats/skill_frames": np.array([30.0, 0.0, 0.0]),
        "episode_extra_stats/skill_errors": np.array([0.0, 1.0, 0.0])}}, 0)
    record = observer.record(runner)
    assert record["episodes"] == 3 and record["env_frames"] == 50 and record["mean_return"] == 1.0
    assert record["success_rate"] == pytest.approx(2 / 3) and record["skill_frame_fraction"] == 30 / 50
    assert record["skill_errors"] == 1
    assert record["action_shares"] == {}  # no decisions reported: no shares


def test_the_progress_says_what_the_policy_chose_over_the_last_episodes(tmp_path: Path) -> None:
    from services.learner.vec_env import choice_key

    observer, runner = ProgressObserver(tmp_path, frame_budget=10_000, interval=0.0), Runner()
    plan, skill = (f"episode_extra_stats/choices/{choice_key(name)}" for name in ("plan", "skill:shelter"))
    observer.on_episode(runner, {"episodic": {"reward": np.array([1.0, 0.0]), "len": np.array([4, 4]),
                                              plan: np.array([3.0, 1.0]), skill: np.array([1.0, 3.0])}}, 0)
    observer.on_episode(runner, {"episodic": {"reward": 0.0, "len": 2, plan: 2.0, skill: 0.0}}, 0)  # one env
    assert observer.record(runner)["action_shares"] == {"plan": 0.6, "skill:shelter": 0.4}


def test_tensorboard_gets_the_curves_by_env_frames(tmp_path: Path) -> None:
    class Writer:  # Sample Factory's tensorboardX SummaryWriter of the job (under JOB_DIR/sf)
        scalars: list[tuple[str, float, int]] = []

        def add_scalar(self, tag: str, value: float, step: int) -> None:
            self.scalars.append((tag, value, step))

    observer, runner = ProgressObserver(tmp_path, frame_budget=10_000, interval=0.0), Runner()
    observer.on_episode(runner, episode(1.0, decisions=10, frames=40, success=1.0), 0)
    observer.on_episode(runner, episode(0.0, decisions=10, frames=20), 0)
    observer.extra_summaries(runner, 0, Writer(), 20)  # as the runner calls it: policy, writer, its env steps
    assert Writer.scalars == [("rlgpt/success_rate", 0.5, 60), ("rlgpt/mean_return", 0.5, 60)]


def test_fps_is_measured_over_recent_records(tmp_path: Path) -> None:
    observer, runner = ProgressObserver(tmp_path, frame_budget=10_000, interval=0.0), Runner()
    assert observer.record(runner)["fps"] == 0.0
    time.sleep(0.1)
    runner.env_steps = {0: 500}
    fps = observer.record(runner)["fps"]
    assert 500 / 1.0 < fps < 500 / 0.1 + 1


def test_the_budget_stops_training_and_the_final_record_says_why(tmp_path: Path) -> None:
    observer, runner = ProgressObserver(tmp_path, frame_budget=1000, interval=3600.0), Runner()
    observer.on_training_step(runner, 1)
    assert runner.stopped == 0 and records(tmp_path)[0]["env_frames"] == 0  # the first step writes a record
    runner.env_steps = {0: 600, 1: 400}
    observer.on_training_step(runner, 2)
    assert runner.stopped == 1 and observer.reason == "budget"
    assert len(records(tmp_path)) == 1  # within the interval: no new record
    observer.on_stop(runner)
    final = records(tmp_path)[-1]
    assert final["final"] is True and final["reason"] == "budget" and final["env_frames"] == 1000


def test_a_job_whose_loop_ended_before_its_stop_callback_still_writes_its_final_record(tmp_path: Path) -> None:
    """Under load Sample Factory's loop has ended without calling on_stop: the job then failed as "exited with code
    0" although it trained its budget. The exit code is decided after the final record is written, once."""
    observer, runner = ProgressObserver(tmp_path, frame_budget=1000, interval=3600.0), Runner()
    runner.env_steps = {0: 1000}
    observer.on_training_step(runner, 1)  # the budget is reached: the runner is asked to stop
    assert observer.reason == "budget" and not any(r["final"] for r in records(tmp_path))
    assert exit_code(observer, runner, ExperimentStatus.SUCCESS) == 0
    finals = [r for r in records(tmp_path) if r["final"]]
    assert len(finals) == 1 and finals[0]["reason"] == "budget"
    assert exit_code(observer, runner, ExperimentStatus.SUCCESS) == 0 and len(records(tmp_path)) == 2  # once
    observer.interval = 0.0
    observer.on_training_step(runner, 2)  # a step the loop still ran after the stop: the final record stays last
    assert records(tmp_path)[-1]["final"] is True
    idle = ProgressObserver(tmp_path / "other", frame_budget=1000, interval=3600.0)
    (tmp_path / "other").mkdir()
    assert exit_code(idle, Runner(), ExperimentStatus.FAILURE) == 1  # no reason to stop: nothing written
    assert not (tmp_path / "other" / "progress.jsonl").exists()


def test_the_stop_file_stops_training(tmp_path: Path) -> None:
    observer, runner = ProgressObserver(tmp_path, frame_budget=1000, interval=0.0), Runner()
    observer.on_training_step(runner, 1)
    assert runner.stopped == 0
    (tmp_path / "stop").touch()
    observer.on_training_step(runner, 2)
    assert runner.stopped == 1 and observer.reason == "stopped"
    observer.on_stop(runner)
    assert records(tmp_path)[-1]["reason"] == "stopped"


def test_main_wants_exactly_a_job_dir(capsys) -> None:
    assert main(["train"]) == 2
    assert "usage: python -m services.learner.train JOB_DIR" in capsys.readouterr().err
    assert main(["train", "a", "b"]) == 2


class Watch:
    """A job watch that says what it was told (the real checks: tests/unit/learner/test_job_watch.py)."""

    def __init__(self, reason: str | None) -> None:
        self.reason, self.message, self.stop_grace = reason, "told so", 20.0

    def check(self) -> str | None:
        return self.reason


def test_the_self_watch_stops_the_runner_once_with_its_reason(tmp_path: Path, monkeypatch) -> None:
    exits: list[float] = []
    monkeypatch.setattr("services.learner.train.exit_later", lambda seconds, code, before: exits.append(seconds))
    observer, runner = ProgressObserver(tmp_path, 1000, 0.0, Watch(None)), Runner()
    observer.extra_summaries(runner, 0, None, 0)
    assert runner.stopped == 0 and observer.reason == ""
    observer.watch = Watch("env_server_lost")
    observer.extra_summaries(runner, 0, None, 0)
    observer.extra_summaries(runner, 0, None, 0)
    assert runner.stopped == 1 and observer.reason == "env_server_lost" and exits == [20.0]
    observer.on_stop(runner)
    observer.on_stop(runner)  # the backstop's own final record is not written twice
    final = [r for r in records(tmp_path) if r["final"]]
    assert len(final) == 1 and final[0]["reason"] == "env_server_lost"


def test_sample_factory_loads_a_checkpoint_holding_numpy_scalars(tmp_path, monkeypatch) -> None:
    # Once a best policy is saved, SF's checkpoints hold a numpy float; torch's weights_only default refused
    # them and every resumed job silently trained from scratch.
    import numpy as np
    import torch
    from sample_factory.algo.learning.learner import Learner

    from services.learner.train import trust_own_checkpoints

    path = tmp_path / "checkpoint_000000010_2048.pth"
    torch.save({"env_steps": 2048, "best_performance": np.float32(3.5)}, path)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0")  # monkeypatch restores whatever trust sets
    monkeypatch.delenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", raising=False)
    assert Learner.load_checkpoint([str(path)], "cpu") is None  # the failure this guards against
    trust_own_checkpoints()
    loaded = Learner.load_checkpoint([str(path)], "cpu")
    assert loaded["env_steps"] == 2048 and loaded["best_performance"] == np.float32(3.5)


def test_a_terminate_signal_stops_the_runner_once_as_a_stop(tmp_path: Path, monkeypatch) -> None:
    exits: list[float] = []
    monkeypatch.setattr("services.learner.train.exit_later", lambda seconds, code, before: exits.append(seconds))
    observer, runner = ProgressObserver(tmp_path, 1000, 0.0), Runner()  # no self-watch: run by hand
    observer.extra_summaries(runner, 0, None, 0)
    assert runner.stopped == 0
    observer.terminate(signal.SIGTERM)
    assert runner.stopped == 0  # the handler only raises a flag; the runner's own loop acts on it
    observer.extra_summaries(runner, 0, None, 0)
    observer.extra_summaries(runner, 0, None, 0)
    assert runner.stopped == 1 and observer.reason == "stopped" and exits == [20.0]
