"""The training process's parts that run without a training: Sample Factory's arguments, the progress observer
(frames, records, budget and stop file), the command line and the watch on the learner that launched it.

A real Sample Factory training through a real env server is tests/integration/test_learner.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlgpt.v1 import learner_pb2
from services.learner.sf_env import ENV_NAME
from services.learner.train import ROLLOUT, job_device, parse_cfg, sf_argv


def argv_of(job_dir: Path, **fields) -> dict[str, str]:
    config = learner_pb2.RLConfig(env_frames=5000, num_workers=2, envs_per_worker=4, seed=9, **fields)
    return dict(arg.removeprefix("--").split("=", 1) for arg in sf_argv(config, job_dir, "cpu"))


def test_a_gpu_job_trains_on_cuda_and_sample_factory_accepts_the_device(tmp_path: Path) -> None:
    gpu = learner_pb2.RLConfig(env_frames=5000, num_workers=1, envs_per_worker=2, gpu=True)
    assert job_device(gpu, {"device": "cpu"}) == "cuda"  # a Kubernetes Job that asked for nvidia.com/gpu
    assert job_device(learner_pb2.RLConfig(), {"device": "cuda"}) == "cuda"
    assert job_device(learner_pb2.RLConfig(), {}) == "cpu"
    assert parse_cfg(sf_argv(gpu, tmp_path / "job1", "cuda")).device == "gpu"
    assert parse_cfg(sf_argv(gpu, tmp_path / "job1", "cpu")).device == "cpu"


def test_a_plan_prior_starts_the_policy_on_the_plan_action(tmp_path: Path) -> None:
    import gymnasium as gym
    import torch
    from sample_factory.model.actor_critic import create_actor_critic

    from services.learner.spaces import observation_space
    from services.learner.train import register_components

    assert "rlgpt_plan_prior" not in argv_of(tmp_path)  # none set: the network's own start
    register_components()
    torch.manual_seed(0)  # the uniform start's share depends on the random init
    space = observation_space((64, 64, 3), (8,), 10.0)
    obs = {"image": torch.randint(0, 256, (32, 3, 64, 64), dtype=torch.uint8), "vector": torch.rand(32, 8) * 9}
    shares = {}
    for prior in (0.0, 0.9):
        cfg = parse_cfg(sf_argv(learner_pb2.RLConfig(env_frames=5000, num_workers=1, envs_per_worker=2,
                                                     plan_prior=prior), tmp_path / "job1", "cpu"))
        assert cfg.rlgpt_plan_prior == pytest.approx(prior)
        model = create_actor_critic(cfg, space, gym.spaces.Discrete(10))
        with torch.no_grad():
            logits = model(obs, model.initial_rnn_state(32) if hasattr(model, "initial_rnn_state")
                           else torch.zeros(32, 0))["action_logits"]
        shares[prior] = torch.softmax(logits, dim=1)[:, -1]
    # on every observation, not just on average over a random init (the head's weights start small)
    assert shares[0.9].min().item() == pytest.approx(0.9, abs=0.02)
    assert shares[0.9].max().item() == pytest.approx(0.9, abs=0.02)
    assert shares[0.0].mean().item() == pytest.approx(0.1, abs=0.05)  # about uniform over the 10 actions


def test_sample_factory_parses_the_arguments(tmp_path: Path) -> None:
    config = learner_pb2.RLConfig(env_frames=5000, num_workers=2, envs_per_worker=4, seed=9, learning_rate=0.001)
    cfg = parse_cfg(sf_argv(config, tmp_path / "job1", "cpu"))
    assert cfg.rlgpt_job_dir == str(tmp_path / "job1") and cfg.env == ENV_NAME
    assert (cfg.num_workers, cfg.num_envs_per_worker, cfg.worker_num_splits, cfg.batch_size) == (2, 1, 1, 256)
    assert cfg.batched_sampling is True
    assert cfg.train_for_env_steps == 5000 and cfg.learning_rate == pytest.approx(0.001) and cfg.use_rnn is False
    with pytest.raises(SystemExit):  # the job dir is required
        parse_cfg([f"--env={ENV_NAME}", "--experiment=x"])


def test_macro_actions_or_a_kept_plan_get_more_gradient_steps_per_batch(tmp_path: Path) -> None:
    # One decision of a macro action spans many frames, so a batch costs many frames: by default 4 passes over it
    # in minibatches of 4 trajectories (2 x 8 envs: 4 minibatches, 16 steps a batch), unless the config says.
    def updates(**fields: Any) -> tuple[str, str, str]:
        config = learner_pb2.RLConfig(**{"env_frames": 5000, "num_workers": 2, "envs_per_worker": 8, **fields})
        args = dict(arg.removeprefix("--").split("=", 1) for arg in sf_argv(config, tmp_path / "job1", "cpu"))
        return args["num_epochs"], args["num_batches_per_epoch"], args["batch_size"]

    assert updates() == ("1", "1", str(ROLLOUT * 16))  # primitives only: one step a batch
    assert updates(skills=["chop"]) == ("4", "4", str(ROLLOUT * 4))
    assert updates(plan=[learner_pb2.PlanStep(skill="chop")]) == ("4", "4", str(ROLLOUT * 4))
    assert updates(skills=["chop"], num_epochs=2, num_minibatches=8) == ("2", "8", str(ROLLOUT * 2))
    assert updates(skills=["chop"], envs_per_worker=1) == ("4", "1", str(ROLLOUT * 2))  # 2 trajectories: one
    cfg = parse_cfg(sf_argv(learner_pb2.RLConfig(env_frames=5000, num_workers=2, envs_per_worker=8, skills=["c"]),
                            tmp_path / "job2", "cpu"))
    assert (cfg.batch_size, cfg.num_batches_per_epoch, cfg.num_epochs) == (ROLLOUT * 4, 4, 4)  # SF accepts it


def test_more_passes_and_minibatches_learn_more_from_each_batch(tmp_path: Path) -> None:
    # The batch (256 transitions: 2 workers x 4 envs x 32) is split into 4 minibatches of 2 rollouts each, and
    # passed over 3 times: 12 gradient steps per batch instead of 1; Sample Factory accepts it.
    config = learner_pb2.RLConfig(env_frames=5000, num_workers=2, envs_per_worker=4, seed=9, num_epochs=3,
                                  num_minibatches=4)
    cfg = parse_cfg(sf_argv(config, tmp_path / "job1", "cpu"))
    assert (cfg.batch_size, cfg.num_batches_per_epoch, cfg.num_epochs) == (64, 4, 3)
    assert cfg.batch_size * cfg.num_batches_per_epoch == ROLLOUT * 2 * 4


WATCHED = """
import sys, time
from services.learner.train import watch_learner
watch_learner(int(sys.argv[1]), interval=0.05, grace=0.2)
print("watching", flush=True)
time.sleep(60)
"""


def test_a_hung_job_ends_its_process_group_when_its_learner_is_gone() -> None:
    root = str(Path(__file__).resolve().parents[3])
    learner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    job = subprocess.Popen([sys.executable, "-c", WATCHED, str(learner.pid)], cwd=root, stdout=subprocess.PIPE,
                           text=True, start_new_session=True, env={**os.environ, "PYTHONPATH": root})
    try:
        assert job.stdout.readline().strip() == "watching"
        assert job.poll() is None
        learner.kill()
        learner.wait()
        assert job.wait(timeout=20) == -signal.SIGKILL
    finally:
        for process in (learner, job):
            if process.poll() is None:
                process.kill()
                process.wait()


