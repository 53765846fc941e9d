"""Every field of the learner's requests, generated from learner.proto, at 5 MB, 100,000 entries, control
characters, a lone surrogate, NaN, infinity and integer extremes, sent to a real learner (over the shared env
server) on a loopback channel (issue 38): never INTERNAL or UNKNOWN, every message under 300 bytes, the learner
serving after each. No call starts a training: the base config's frame budget is 0, which no bad value mends."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from bad_input_support import bad_cases, check_case
from learner_support import Learner, register_skills, settings_for, start_learner, wood_config

from rlgpt.v1 import common_pb2, env_pb2, learner_pb2
from services.learner.servicer import SERVICE_NAME

PROBE = "learner_bad_input_probe"
WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=1))
CONFIG = wood_config(0, skills=(), plan=[learner_pb2.PlanStep(skill=PROBE, success=[WOOD])],
                     prefix=[common_pb2.PrefixStep(skill=PROBE, success=[WOOD], max_frames=10)])
CONFIG.task.success.append(WOOD)
BASES = {
    "StartTraining": learner_pb2.StartTrainingRequest(config=CONFIG),
    "Evaluate": learner_pb2.EvaluateRequest(checkpoint="no_such_job/checkpoint.pth", episodes=1)}
"""Requests refused for one reason each (the config's frame budget 0, a checkpoint no job wrote), so that a bad field
adds one problem, not those of entries the generator had to add; a bad checkpoint path reaches the file system."""
CASES = bad_cases(learner_pb2.DESCRIPTOR.services_by_name["LearnerService"], BASES)


@pytest.fixture(scope="module")
def learner(env_server, tmp_path_factory) -> Iterator[Learner]:
    register_skills(env_server, {PROBE: "def skill(agent):\n    yield 'noop'\n"})
    running = start_learner(settings_for(env_server.target, tmp_path_factory.mktemp("bad_inputs")))
    yield running
    running.stop()
    env_server.stub.DeleteSkill(env_pb2.DeleteSkillRequest(name=PROBE))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_field(learner: Learner, case) -> None:
    check_case(learner.channel, case, SERVICE_NAME)


def test_the_issues_examples_are_invalid_argument(learner: Learner) -> None:
    """A 5 MB config name and runner, and a NUL in a checkpoint path (it was INTERNAL), name the field and the
    limit, which DescribeLearner serves; no job is made."""
    limits = learner.stub.DescribeLearner(learner_pb2.DescribeLearnerRequest())
    assert limits.requests.max_name_chars == 128 and limits.requests.fields["EvaluateRequest.checkpoint"] == 4096
    assert limits.max_eval_episodes == 256 and limits.max_env_frames == learner.settings.max_env_frames
    named, run_by = wood_config(1000), wood_config(1000)
    named.name = run_by.runner = "n" * 5_000_000
    for bad, needle in [
            (learner_pb2.StartTrainingRequest(config=named), "config.name is 5000000 chars; the limit is 128"),
            (learner_pb2.StartTrainingRequest(config=run_by), "config.runner is 5000000 chars; the limit is 128"),
            (learner_pb2.EvaluateRequest(checkpoint="a\x00b", episodes=1), "checkpoint holds a control character")]:
        with pytest.raises(grpc.RpcError) as info:
            (learner.stub.Evaluate if isinstance(bad, learner_pb2.EvaluateRequest) else learner.stub.StartTraining)(
                bad, timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and needle in info.value.details()
        assert len(info.value.details()) < 300
    assert not learner.stub.ListJobs(learner_pb2.ListJobsRequest()).jobs


def test_the_base_config_is_refused_for_its_frame_budget_only(learner: Learner) -> None:
    with pytest.raises(grpc.RpcError) as info:
        learner.stub.StartTraining(BASES["StartTraining"], timeout=60)
    assert info.value.details() == "invalid RL config: env_frames=0: the frame budget must be > 0"
