"""A job's frame budget counted where the frames are spent: each vector env counts its frames (skills' and a chain
prefix's included) in the job dir, stops stepping its session once the job's sum reached the budget, and the
training's observer stops the job on that same sum (the bench-rlgpt overshoot: 18,773 frames of 10,000)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from rlgpt.env_client import EnvBatch
from services.learner.frame_budget import FrameMeter, frames_touched, spent_frames
from services.learner.train import ProgressObserver
from services.learner.vec_env import SessionVecEnv


class Session:
    """A session of 2 envs whose every step is a skill of ``k`` frames, and env 0's episode ends on its second step
    with an autoreset that ran a prefix of ``prefix`` frames (counted in the step's frames)."""

    actions = ["noop", "skill:chop"]
    image_shape, vector_shape, vector_scale = (4, 4, 3), (2,), 10.0
    num_envs = 2

    def __init__(self, k: int, prefix: int):
        self.k, self.prefix, self.steps = k, prefix, 0
        self.first_observations = self.observation(2)
        self.first_prefix_frames = np.array([prefix, prefix], np.int64)
        self.prefix_frames = np.zeros(2, np.int64)

    @staticmethod
    def observation(rows: int) -> dict[str, np.ndarray]:
        return {"image": np.zeros((rows, 4, 4, 3), np.uint8), "vector": np.zeros((rows, 2), np.float32)}

    def step_envs(self, actions: list[int], envs: Any) -> EnvBatch:
        self.steps += 1
        ended = np.array([self.steps % 2 == 0, False])
        self.prefix_frames = np.where(ended, self.prefix, 0).astype(np.int64)
        no = np.zeros(2, bool)
        return EnvBatch(observation=self.observation(2), rewards=np.ones(2, np.float32), terminated=ended,
                        truncated=no, frames=self.k + self.prefix_frames, success=no, achievements=np.zeros(2),
                        skill_error=no)

    def close(self) -> None:
        return None


class Runner:
    env_steps = {0: 0}
    policy_lag: list[dict[str, float]] = []

    def __init__(self) -> None:
        self.stopped = 0

    def _stop_training(self) -> None:
        self.stopped += 1


def test_the_sum_of_the_counters_is_the_jobs_frames(tmp_path: Path) -> None:
    assert spent_frames(tmp_path) is None  # no env counts: the observer estimates instead
    one, two = FrameMeter(tmp_path, 0, 0, 100), FrameMeter(tmp_path, 1, 0, 100)
    one.add(30)
    two.add(60)
    assert spent_frames(tmp_path) == 90 and not one.over()
    two.add(10)
    assert spent_frames(tmp_path) == 100 and one.over() and two.over()
    assert FrameMeter(tmp_path, 0, 0, 100).frames == 30  # a resumed job's counter goes on


def test_when_the_envs_last_counted_frames_is_the_newest_counter(tmp_path: Path) -> None:
    assert frames_touched(tmp_path) is None  # no env has counted yet
    first, second = FrameMeter(tmp_path, 0, 0, 0), FrameMeter(tmp_path, 1, 0, 0)
    first.add(10)
    second.add(5)
    os.utime(first.path, (1_000.0, 1_000.0))
    os.utime(second.path, (2_000.0, 2_000.0))
    assert frames_touched(tmp_path) == 2_000.0


def test_the_env_counts_prefix_and_skill_frames_and_stops_stepping_at_the_budget(tmp_path: Path) -> None:
    session = Session(k=20, prefix=15)
    env = SessionVecEnv(session, range(2), meter=FrameMeter(tmp_path, 0, 0, 100))
    obs, _ = env.reset()
    assert spent_frames(tmp_path) == 2 * 15  # the first episodes' prefixes
    env.step(np.array([1, 1]))
    assert spent_frames(tmp_path) == 30 + 2 * 20
    env.step(np.array([1, 1]))  # env 0's autoreset ran its prefix: 15 more
    assert spent_frames(tmp_path) == 70 + 2 * 20 + 15 == 125
    assert session.steps == 2
    last, rewards, terminated, truncated, info = env.step(np.array([1, 1]))
    assert session.steps == 2 and spent_frames(tmp_path) == 125  # past the budget: no step, no frames
    assert rewards.tolist() == [0, 0] and not terminated.any() and not truncated.any() and info == {}
    assert last["image"].shape == obs["image"].shape
    # Overshoot: at most one decision per env (a skill's K frames, plus a prefix if it reset).
    assert 125 - 100 <= 2 * 20 + 15


def test_the_observer_counts_the_envs_frames_and_stops_the_job_on_them(tmp_path: Path) -> None:
    observer, runner = ProgressObserver(tmp_path, frame_budget=100, interval=3600.0), Runner()
    meter = FrameMeter(tmp_path, 0, 0, 100)
    meter.add(99)
    observer.on_training_step(runner, 1)
    assert observer.frames(runner) == 99 and runner.stopped == 0
    meter.add(40)
    observer.extra_summaries(runner, 0, None)  # between training steps too: envs past the budget idle
    assert observer.reason == "budget" and runner.stopped == 1
    observer.on_training_step(runner, 2)
    assert runner.stopped == 1  # stopped once
    assert observer.record(runner)["env_frames"] == 139
