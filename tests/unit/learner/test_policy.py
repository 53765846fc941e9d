"""A loaded policy's actions: sampled from its distribution, or its most probable one when greedy."""

import numpy as np
import torch

from services.learner.policy import Policy


class Logits:
    """Stands in for the actor-critic: the same logits for every observation (action 2 most probable)."""

    def __call__(self, obs, rnn_states):
        return {"action_logits": torch.tensor([[0.0, 1.0, 1.5, 0.5]]).repeat(len(obs["image"]), 1)}


def test_greedy_takes_the_most_probable_action_and_sampling_does_not_always() -> None:
    policy = Policy(Logits())
    images, vectors = np.zeros((64, 8, 8, 3), np.uint8), np.zeros((64, 2), np.float32)
    assert policy.act(images, vectors, torch.Generator().manual_seed(0), greedy=True) == [2] * 64
    sampled = policy.act(images, vectors, torch.Generator().manual_seed(0))
    assert set(sampled) > {2}  # the others have probability too


def test_a_resume_checks_the_latest_checkpoint_against_what_the_env_serves(tmp_path) -> None:
    import pytest
    import torch

    from rlgpt.errors import FailedPrecondition
    from services.learner.policy import ACTION_WEIGHT, VECTOR_WEIGHT, check_resumable

    job_dir = tmp_path / "job-7"
    check_resumable(job_dir, 23, 9)  # nothing saved yet: a resume starts afresh, nothing to refuse
    saved = job_dir / "sf" / "job-7" / "checkpoint_p0"
    saved.mkdir(parents=True)
    torch.save({"model": {VECTOR_WEIGHT: torch.zeros(64, 20), ACTION_WEIGHT: torch.zeros(9, 256)}},
               saved / "checkpoint_000000001_100.pth")
    check_resumable(job_dir, 20, 9)
    with pytest.raises(FailedPrecondition, match=r"checkpoint_000000001_100.pth of job job-7 does not fit .*a vector "
                                                 r"of 23 entries, 9 actions.*The checkpoint's: a vector of 20"):
        check_resumable(job_dir, 23, 9)
    with pytest.raises(FailedPrecondition, match="The checkpoint's: a vector of 20 entries, 9 actions"):
        check_resumable(job_dir, 20, 10)
