"""What the planner's tests share: the env server's Describe, as recorded (no server), and an empty skill library."""

from __future__ import annotations

import pytest
from describe_support import recorded_describe

from rlgpt.v1 import env_pb2
from services.planner.skill_library import SkillLibrary


@pytest.fixture
def describe() -> env_pb2.DescribeResponse:
    """The env server's Describe for Crafter (tests/data/describe_crafter.textproto; a test in tests/integration
    checks it against a live server)."""
    return recorded_describe()


@pytest.fixture
def library(tmp_path) -> SkillLibrary:
    return SkillLibrary(tmp_path / "library.json")
