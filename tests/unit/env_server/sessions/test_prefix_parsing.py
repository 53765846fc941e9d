"""A session's prefix read from a CreateSessionRequest: every problem of its steps said at once, a missing skill
named (NotFound), a skill of another backend refused."""

from __future__ import annotations

import pytest

from rlgpt.errors import InvalidArgument, NotFound
from rlgpt.v1 import common_pb2
from services.env_server.backends.crafter import CrafterBackend
from services.env_server.sessions.prefix import parse_prefix
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillRegistry

WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=1))
CODE = "def skill(agent):\n    yield 'noop'\n"


@pytest.fixture
def skills() -> SkillRegistry:
    registry = SkillRegistry(EnvServerSettings())
    registry.put("chop", "", CODE, "crafter", replace=False)
    registry.put("dig", "", CODE, "minedojo", replace=False)
    return registry


def step(skill: str = "chop", success: tuple[common_pb2.Condition, ...] = (WOOD,),
         max_frames: int = 50) -> common_pb2.PrefixStep:
    return common_pb2.PrefixStep(skill=skill, success=list(success), max_frames=max_frames)


def test_a_prefix_becomes_its_skills_conditions_and_budgets(skills: SkillRegistry) -> None:
    table = common_pb2.Condition(achievement="place_table")
    parsed = parse_prefix(CrafterBackend(), [step(), step(success=(table,), max_frames=9)], skills, 100)
    assert [(p.skill.name, p.max_frames) for p in parsed] == [("chop", 50), ("chop", 9)]
    assert parsed[0].success.holds(set(), {"wood": 1}) and not parsed[0].success.holds(set(), {})
    assert parsed[1].success.holds({"place_table"}, {})
    assert parse_prefix(CrafterBackend(), [], skills, 100) == ()


def test_every_problem_of_the_steps_is_said_at_once(skills: SkillRegistry) -> None:
    bad_item = common_pb2.Condition(inventory=common_pb2.ItemCount(item="gold", count=1))
    with pytest.raises(InvalidArgument) as info:
        parse_prefix(CrafterBackend(), [step(success=()), step(max_frames=0), step(max_frames=101),
                                        step(success=(bad_item,))], skills, 100)
    message = str(info.value)
    assert "prefix[0].success is empty: a prefix step needs the conditions that say its link is done" in message
    assert "prefix[1].max_frames=0 must be in 1..100" in message
    assert "prefix[2].max_frames=101 must be in 1..100" in message
    assert "prefix[3].success[0]: unknown item 'gold' for crafter" in message


def test_a_missing_skill_is_named_and_a_skill_of_another_backend_refused(skills: SkillRegistry) -> None:
    with pytest.raises(NotFound, match=r"prefix\[1\].skill: no skill named 'fly'; register it first"):
        parse_prefix(CrafterBackend(), [step(), step(skill="fly")], skills, 100)
    with pytest.raises(InvalidArgument, match=r"prefix\[0\]: skill 'dig' was written for minedojo, not crafter"):
        parse_prefix(CrafterBackend(), [step(skill="dig")], skills, 100)
