"""What the planner's integration tests share: a live env server's Describe (one per module) and an empty library."""

from __future__ import annotations

import pytest

from rlgpt.v1 import env_pb2
from services.planner.skill_library import SkillLibrary


@pytest.fixture(scope="module")
def describe(env_server) -> env_pb2.DescribeResponse:
    return env_server.stub.Describe(env_pb2.DescribeRequest())


@pytest.fixture
def library(tmp_path) -> SkillLibrary:
    return SkillLibrary(tmp_path / "library.json")
