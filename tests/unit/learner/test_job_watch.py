"""A training job's self-watch: a lost env server, a learner whose pid is gone, a heartbeat gone stale."""

from __future__ import annotations

import os
import time
from pathlib import Path

from services.learner.job_watch import ENV_SERVER_LOST, LEARNER_GONE, LEARNER_HEARTBEAT, JobWatch, touch_heartbeat


def test_nothing_wrong_means_no_reason(tmp_path: Path) -> None:
    assert JobWatch(tmp_path).check() is None
    assert JobWatch(tmp_path, learner_pid=os.getpid()).check() is None


def test_an_env_server_lost_comes_first(tmp_path: Path) -> None:
    (tmp_path / "error.json").write_text("{}")
    watch = JobWatch(tmp_path, learner_pid=123, alive=lambda pid: False)
    assert watch.check() == ENV_SERVER_LOST and "env server" in watch.message


def test_a_local_learner_is_watched_by_its_pid(tmp_path: Path) -> None:
    watch = JobWatch(tmp_path, learner_pid=4242, alive=lambda pid: pid != 4242)
    assert watch.check() == LEARNER_GONE and watch.message == "the learner (pid 4242) is gone"


def test_a_kubernetes_job_is_watched_by_the_learners_heartbeat(tmp_path: Path) -> None:
    watch = JobWatch(tmp_path, learner_timeout=60)
    assert watch.check() is None  # no heartbeat yet: a learner that never wrote one is not judged
    touch_heartbeat(tmp_path)
    assert watch.check() is None
    stale = time.time() - 120
    os.utime(tmp_path / LEARNER_HEARTBEAT, (stale, stale))
    assert watch.check() == LEARNER_GONE
    assert "no learner has watched this job for 12" in watch.message and "learner_timeout=60 s" in watch.message
    touch_heartbeat(tmp_path)
    assert watch.check() is None


def test_the_timeout_comes_from_the_jobs_config(tmp_path: Path) -> None:
    assert JobWatch.for_job(tmp_path, {"learner_timeout": 30}, None).learner_timeout == 30.0
    assert JobWatch.for_job(tmp_path, {}, 7).learner_pid == 7
