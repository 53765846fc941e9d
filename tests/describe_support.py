"""A recorded ``DescribeResponse``: what the env server's Describe answers for Crafter, kept as text beside the tests.

The fast tier's planner and critic tests read it instead of asking a live env server. It is recorded from the env
server's own Describe with the test settings (``python tests/describe_support.py`` rewrites it), and
tests/integration/test_describe_recording.py fails when a live server answers anything else, so it cannot go stale.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from google.protobuf import text_format

from rlgpt.v1 import env_pb2

RECORDING = Path(__file__).parent / "data" / "describe_crafter.textproto"


@functools.cache
def _recorded() -> bytes:
    return text_format.Parse(RECORDING.read_text(), env_pb2.DescribeResponse()).SerializeToString()


def recorded_describe() -> env_pb2.DescribeResponse:
    """The recorded Describe answer for the default backend (Crafter): a fresh copy per call."""
    return env_pb2.DescribeResponse.FromString(_recorded())


def live_describe() -> env_pb2.DescribeResponse:
    """What the env server's Describe answers with the tests' settings (built in process, no server)."""
    from conftest import TEST_ENV_SETTINGS

    from services.env_server.describe import describe
    return describe("", TEST_ENV_SETTINGS)


def as_text(describe: env_pb2.DescribeResponse) -> str:
    return text_format.MessageToString(describe)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    RECORDING.write_text(as_text(live_describe()))
    print(f"wrote {RECORDING}")
