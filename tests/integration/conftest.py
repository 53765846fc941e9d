"""What several integration files read, made once a session: one learner and one real wood training (the
test_learner* files), one whole `rlgpt run` of a coded and two RL sub-tasks (test_rlgpt_run and
test_rlgpt_method), and the services of a remote planner with one wood run recorded on them (test_rlgpt_run_remote
and test_rlgpt_replay). Runs and trainings that test another behaviour start their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from learner_support import Learner, register_skills, settings_for, start_learner, watch_until_done, wood_config
from rlgpt_run_support import Cluster, MixedRun, run_mixed, serve_cluster

from rlgpt.v1 import learner_pb2
from services.env_server.skills.reference import COLLECT_WOOD


@pytest.fixture(scope="session")
def learner(env_server, tmp_path_factory) -> Iterator[Learner]:
    """A learner on the shared env server; each file registers the skills its jobs name."""
    running = start_learner(settings_for(env_server.target, tmp_path_factory.mktemp("learner")))
    yield running
    running.stop()


@pytest.fixture(scope="session")
def wood_job(env_server, learner) -> tuple[str, list[learner_pb2.JobProgress]]:
    """One real APPO training of collect_wood with the coded skill learn_wood in its action space (2500 frames):
    its job id and every progress record WatchJob sent. test_learner checks the training, test_learner_chain
    evaluates its policy."""
    register_skills(env_server, {"learn_wood": COLLECT_WOOD})
    job_id = learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=wood_config(2500))).job_id
    return job_id, watch_until_done(learner, job_id)


@pytest.fixture(scope="session")
def mixed_run(tmp_path_factory) -> MixedRun:
    """A finished `rlgpt run` (slow-fast-critic, two env servers) of a coded and two RL sub-tasks, one with its
    own macro action."""
    return run_mixed(tmp_path_factory.mktemp("mixed") / "runs")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A planner (with env, learner, critic) whose runs lie in a folder of its own, its first run (collect_wood by
    code) finished through it."""
    with serve_cluster(tmp_path_factory.mktemp("planner-volume"), tmp_path_factory.mktemp("client")) as served:
        yield served
