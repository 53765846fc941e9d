"""A job's sessions spread over several real env servers on loopback, and StartTraining's refusals for a second
server that does not answer, more envs per worker than a session holds, and a GPU this machine lacks."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from learner_support import settings_for, start_learner, watch_until_done, wood_config

from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.v1 import env_pb2, env_pb2_grpc, learner_pb2
from services.env_server.servicer import SERVICE_NAME as ENV_SERVICE
from services.env_server.servicer import EnvServicer
from services.env_server.skills.reference import COLLECT_WOOD
from services.learner import rl_config

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def second_env_server(env_server):
    servicer = EnvServicer(env_server.servicer.settings)
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(ENV_SERVICE, env_pb2_grpc.add_EnvServiceServicer_to_server, servicer)], metrics_label="env2")
    yield servicer, f"127.0.0.1:{port}"
    servicer.sessions.close_all()
    stop_server(server, grace_seconds=1)


def test_a_jobs_workers_put_their_sessions_on_both_env_servers(env_server, second_env_server, tmp_path) -> None:
    second, second_target = second_env_server
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="learn_wood", code=COLLECT_WOOD, replace=True))
    learner = start_learner(settings_for(env_server.target, tmp_path,
                                         env_servers=f"{env_server.target},{second_target}"))
    peaks = {"first": 0, "second": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peaks["first"] = max(peaks["first"], len(env_server.servicer.sessions))
            peaks["second"] = max(peaks["second"], len(second.sessions))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        job_id = learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=wood_config(1500))).job_id
        assert "learn_wood" in [s.name for s in second.skills.all()]  # copied from the learner's own env server
        final = watch_until_done(learner, job_id)[-1]
        assert final.state == learner_pb2.JOB_STATE_SUCCEEDED, final.message
        assert final.env_frames >= 1500
    finally:
        done.set()
        sampler.join()
        learner.servicer.close()
        learner.close()
    assert peaks["first"] >= 1 and peaks["second"] >= 1  # worker 0 on the first server, worker 1 on the second


def refused(learner, config: learner_pb2.RLConfig) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.StartTraining(learner_pb2.StartTrainingRequest(config=config))
    return info.value


def test_an_unreachable_second_env_server_is_refused_at_start(env_server, tmp_path) -> None:
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="learn_wood", code=COLLECT_WOOD, replace=True))
    learner = start_learner(settings_for(env_server.target, tmp_path, env_servers=f"{env_server.target},127.0.0.1:1"))
    try:
        error = refused(learner, wood_config(1000))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error.details().startswith("env server 2 of 2 at 127.0.0.1:1 did not answer (UNAVAILABLE")
        assert "remove it from RLGPT_LEARNER_ENV_SERVERS" in error.details()
        assert not learner.stub.ListJobs(learner_pb2.ListJobsRequest()).jobs  # nothing started
    finally:
        learner.servicer.close()
        learner.close()


def test_more_envs_per_worker_than_a_session_holds_is_invalid(env_server, tmp_path) -> None:
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="learn_wood", code=COLLECT_WOOD, replace=True))
    learner = start_learner(settings_for(env_server.target, tmp_path))
    try:
        limit = env_server.servicer.settings.max_envs_per_session
        config = wood_config(1000)
        config.envs_per_worker = limit + 1
        error = refused(learner, config)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (f"envs_per_worker={limit + 1}: a rollout worker's envs share one env-server session and the env "
                f"server allows {limit} envs per session") in error.details()
    finally:
        learner.servicer.close()
        learner.close()


def test_a_gpu_job_on_a_machine_without_one_is_refused(env_server, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(rl_config, "cuda_available", lambda: False)  # this machine; fixed for machines with one
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="learn_wood", code=COLLECT_WOOD, replace=True))
    learner = start_learner(settings_for(env_server.target, tmp_path, device="cuda"))
    try:
        error = refused(learner, wood_config(1000, gpu=True))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error.details().startswith("gpu=true, but this machine has no CUDA device torch can use")
    finally:
        learner.servicer.close()
        learner.close()


def test_a_plans_skills_are_copied_to_every_env_server(env_server, second_env_server) -> None:
    from rlgpt.v1 import common_pb2
    from services.learner.env_servers import prepare_env_servers

    second, second_target = second_env_server
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="plan_only_wood", code=COLLECT_WOOD,
                                                               replace=True))
    wood = common_pb2.Condition(achievement="collect_wood")
    config = learner_pb2.RLConfig(backend="crafter", plan=[learner_pb2.PlanStep(skill="plan_only_wood",
                                                                                success=[wood])])
    prepare_env_servers([env_server.target, second_target], env_server.target, env_server.stub, config)
    assert "plan_only_wood" in [s.name for s in second.skills.all()]
