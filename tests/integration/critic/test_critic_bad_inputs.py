"""Every field of the critic's requests, generated from critic.proto, at 5 MB, 100,000 entries, control characters,
a lone surrogate, NaN, infinity and integer extremes, sent to a real critic over a loopback channel (issue 38):
never INTERNAL or UNKNOWN, every message under 300 bytes, the critic serving after each."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from bad_input_support import bad_cases, check_case
from critic_samples import episode, request, task_request
from served_support import served

from rlgpt.v1 import critic_pb2, critic_pb2_grpc
from services.critic.servicer import SERVICE_NAME, CriticServicer
from services.critic.settings import CriticSettings

BASES = {"Judge": request(rollouts=[episode(), episode(success=True)]),
         "JudgeTask": task_request(episodes=[episode()])}
"""Requests the critic answers (deterministic verdicts: no LLM), so a bad field is the only thing wrong."""
CASES = bad_cases(critic_pb2.DESCRIPTOR.services_by_name["CriticService"], BASES)


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    servicer = CriticServicer(CriticSettings(use_llm=False))
    with served(SERVICE_NAME, critic_pb2_grpc.add_CriticServiceServicer_to_server, servicer) as channel:
        yield channel


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_field(channel: grpc.Channel, case) -> None:
    check_case(channel, case, SERVICE_NAME)


def test_the_issues_examples_are_invalid_argument(channel: grpc.Channel) -> None:
    """A 5 MB string in a field, 100,000 rollouts and an rl_config of 60 KB of nested brackets (it was INTERNAL:
    RecursionError) name the field and the limit, which DescribeCritic serves."""
    stub = critic_pb2_grpc.CriticServiceStub(channel)
    limits = stub.DescribeCritic(critic_pb2.DescribeCriticRequest()).requests
    assert limits.max_name_chars == 128 and limits.fields["JudgeRequest.rollouts"] == 256
    brackets = "[" * 30_000 + "]" * 30_000
    for bad, needle in [(request(subtask="s" * 5_000_000), "subtask is 5000000 chars; the limit is 128"),
                        (request(rollouts=[episode()] * 100_000), "rollouts has 100000 entries; the limit is 256"),
                        (request(decision="rl", rl_config=brackets), "rl_config: nested too deeply")]:
        with pytest.raises(grpc.RpcError) as info:
            stub.Judge(bad, timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and needle in info.value.details()
    assert stub.Judge(BASES["Judge"], timeout=30).verdict.success_rate == 0.5
