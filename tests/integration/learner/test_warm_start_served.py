"""A training continued from an earlier job's checkpoint (RLConfig.init_from_job) through the real learner: the
session's wood training (tests/integration/conftest.py) is continued with a learning rate too small to move the
weights, so the new job's checkpoint holds the earlier job's weights, and its frames are its own; a config whose
spaces differ, and an unknown job, are refused before anything trains."""

from __future__ import annotations

import grpc
import pytest
import torch
from learner_support import watch_until_done, wood_config

from rlgpt.v1 import learner_pb2
from services.learner.policy import latest_checkpoint

pytestmark = pytest.mark.timeout(600)


def start(learner, config: learner_pb2.RLConfig) -> str:
    return learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=config)).job_id


def test_a_training_starts_from_the_earlier_jobs_weights_and_trains_its_own_frames(learner, wood_job) -> None:
    earlier_id, _ = wood_job
    config = wood_config(600, init_from_job=earlier_id, learning_rate=1e-9)
    config.seed = 7  # a fresh network of another seed would start elsewhere
    job_id = start(learner, config)
    final = watch_until_done(learner, job_id)[-1]
    assert final.state == learner_pb2.JOB_STATE_SUCCEEDED, final.message
    assert final.env_frames >= 600
    earlier, job = learner.servicer.jobs.get(earlier_id), learner.servicer.jobs.get(job_id)
    old = torch.load(latest_checkpoint(earlier.job_dir), map_location="cpu", weights_only=False)
    new = torch.load(latest_checkpoint(job.job_dir), map_location="cpu", weights_only=False)
    assert new["train_step"] >= 1  # it trained: this is its own checkpoint, not the one it started from
    assert new["env_steps"] < old["env_steps"]  # counted from 0, not from the earlier job's decisions
    assert new["model"].keys() == old["model"].keys()
    # The weights are the earlier job's; the returns' running statistics (buffers, not weights) went on from its.
    weights = [k for k in old["model"] if "normalizer" not in k]
    moved = {k: float((new["model"][k] - old["model"][k]).abs().max()) for k in weights}
    assert max(moved.values()) < 1e-5, f"the weights moved at a learning rate of 1e-9: {moved}"
    counts = [k for k in old["model"] if k.endswith("count")]
    assert counts and all(new["model"][k] > old["model"][k] for k in counts)
    assert "Loaded experiment state at self.train_step=0, self.env_steps=0" in (job.job_dir / "train.log").read_text()


def test_a_config_of_other_spaces_or_an_unknown_job_is_refused(learner, wood_job) -> None:
    earlier_id, _ = wood_job
    with pytest.raises(grpc.RpcError) as info:
        start(learner, wood_config(600, skills=(), init_from_job=earlier_id))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert (f"init_from_job='{earlier_id}': its policy cannot start this training, whose action or observation "
            "space is another: the skills differ (the job's: learn_wood; this config's: none)") in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        start(learner, wood_config(600, init_from_job="no-such-job"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND and "no job 'no-such-job'" in info.value.details()
