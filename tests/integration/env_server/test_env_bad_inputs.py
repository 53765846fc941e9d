"""Every field of the env server's requests, generated from env.proto, at 5 MB, 100,000 entries, control characters,
a lone surrogate, NaN, infinity and integer extremes, sent to the shared env server over its loopback channel (issue
38): never INTERNAL or UNKNOWN, every message under 300 bytes, the server serving after each."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from bad_input_support import bad_cases, check_case

from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.servicer import SERVICE_NAME

PROBE = "bad_input_probe"
WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=1))
TASK = common_pb2.TaskSpec(name="collect_wood", success=[WOOD], start_inventory=[common_pb2.ItemCount(item="sapling",
                                                                                                      count=1)])
TERMS = [common_pb2.RewardTerm(kind="inventory_gain", target="wood", weight=1.0)]
GUARDS = [common_pb2.Guard(skill=PROBE, when=[common_pb2.Threshold(label="status/drink", value=3)], max_frames=10)]
BASES = {
    "CreateSession": env_pb2.CreateSessionRequest(
        num_envs=1, task=TASK, reward_terms=TERMS, stages=[env_pb2.Stage(success=[WOOD])],
        prefix=[common_pb2.PrefixStep(skill=PROBE, success=[WOOD], max_frames=10)], guards=GUARDS),
    "ResolveTask": env_pb2.ResolveTaskRequest(task=TASK),
    "RunSkill": env_pb2.RunSkillRequest(skill=PROBE, episodes=1, max_steps=5, task=TASK, reward_terms=TERMS,
                                        stages=[env_pb2.Stage(success=[WOOD])],
                                        prefix=[common_pb2.PrefixStep(skill=PROBE, success=[WOOD], max_frames=10)],
                                        guards=GUARDS),
    "RegisterSkill": env_pb2.RegisterSkillRequest(name=PROBE, code="def skill(agent):\n    yield 'noop'\n",
                                                  replace=True)}
"""Requests the env server accepts, so that the one bad field is all that is wrong with each call."""
CASES = bad_cases(env_pb2.DESCRIPTOR.services_by_name["EnvService"], BASES)


@pytest.fixture(scope="module")
def probe_skill(env_server) -> Iterator[None]:
    """The skill the bases name, registered for the module and deleted after it."""
    env_server.stub.RegisterSkill(BASES["RegisterSkill"])
    yield
    try:
        env_server.stub.DeleteSkill(env_pb2.DeleteSkillRequest(name=PROBE))
    except grpc.RpcError:
        pass  # a bad call deleted it


@pytest.mark.usefixtures("no_leftover_sessions", "probe_skill")
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_field(env_server, case) -> None:
    check_case(env_server.channel, case, SERVICE_NAME)


@pytest.mark.usefixtures("no_leftover_sessions", "probe_skill")
def test_the_bases_are_accepted(env_server) -> None:
    env_server.stub.CreateSession(BASES["CreateSession"])
    env_server.stub.ResolveTask(BASES["ResolveTask"])
    assert len(env_server.stub.RunSkill(BASES["RunSkill"]).episodes) == 1


def test_the_limits_are_served(env_server) -> None:
    limits = env_server.stub.Describe(env_pb2.DescribeRequest()).limits.requests
    settings = env_server.servicer.settings
    assert (limits.max_name_chars, limits.max_text_chars, limits.max_list_entries) == (
        settings.max_name_chars, settings.max_text_chars, settings.max_list_entries)
    assert limits.fields["StepRequest.actions"] == settings.max_envs_per_session
    assert "TaskSpec.description" in limits.text_fields
