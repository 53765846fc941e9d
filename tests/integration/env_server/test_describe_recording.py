"""The recorded Describe answer the fast tier reads (tests/data/describe_crafter.textproto) is what a live env server
answers: when the game or the env server changes what Describe says, this fails until the recording is rewritten
with ``python tests/describe_support.py``."""

from __future__ import annotations

from describe_support import RECORDING, as_text, recorded_describe

from rlgpt.v1 import env_pb2


def test_the_recording_is_what_the_live_env_server_answers(env_server) -> None:
    live = env_server.stub.Describe(env_pb2.DescribeRequest())
    assert as_text(live) == as_text(recorded_describe()), (
        f"{RECORDING} is stale: rewrite it with `python tests/describe_support.py`")
