"""A single job's evaluation: what it refuses before it reaches an env server."""

from pathlib import Path

import pytest

from rlgpt.errors import FailedPrecondition, InvalidArgument
from rlgpt.v1 import learner_pb2
from services.learner.evaluate import check_animate, evaluate
from services.learner.jobs import write_job_config


def test_the_plan_alone_of_a_job_without_a_kept_plan_is_refused(tmp_path: Path) -> None:
    job_dir = tmp_path / "job-1"
    job_dir.mkdir()
    write_job_config(job_dir, learner_pb2.RLConfig(name="table"), {})
    with pytest.raises(FailedPrecondition, match="job job-1 has no kept plan"):
        evaluate(job_dir, "127.0.0.1:1", 2, 0, plan_alone=True)  # no env server there: never reached


def test_animations_are_asked_within_the_env_servers_limit() -> None:
    check_animate(0, 0)
    check_animate(2, 2)
    for animate, limit in ((3, 2), (-1, 2), (1, 0)):
        with pytest.raises(InvalidArgument, match=rf"animate={animate}: must be in 0..{limit}, the env server's "
                                                  "max_animations"):
            check_animate(animate, limit)
