"""A session's guards read from a CreateSessionRequest: triggers on the backend's vector labels, every problem said
at once, a missing skill named (NotFound), a skill of another backend refused; a trigger fires below its value."""

from __future__ import annotations

import numpy as np
import pytest

from rlgpt.errors import InvalidArgument, NotFound
from rlgpt.v1 import common_pb2
from services.env_server.backends.crafter import CrafterBackend
from services.env_server.sessions.guarded import parse_guards
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillRegistry

CODE = "def skill(agent):\n    yield 'noop'\n"


@pytest.fixture
def skills() -> SkillRegistry:
    registry = SkillRegistry(EnvServerSettings())
    registry.put("drink_up", "", CODE, "crafter", replace=False)
    registry.put("dig", "", CODE, "minedojo", replace=False)
    return registry


def guard(skill: str = "drink_up", when: tuple[tuple[str, float], ...] = (("status/drink", 3.0),),
          max_frames: int = 50) -> common_pb2.Guard:
    return common_pb2.Guard(skill=skill, when=[common_pb2.Threshold(label=label, value=value) for label, value in when],
                            max_frames=max_frames)


def test_a_guard_fires_while_any_of_its_entries_is_below_its_value(skills: SkillRegistry) -> None:
    backend = CrafterBackend()
    labels = list(backend.spec.vector_labels)
    (parsed,) = parse_guards(backend, [guard(when=(("status/drink", 3.0), ("world/daylight", 0.5)))], skills, 100)
    assert (parsed.skill.name, parsed.max_frames) == ("drink_up", 50)
    vector = np.zeros(len(labels), dtype=np.float32)
    vector[labels.index("status/drink")], vector[labels.index("world/daylight")] = 5, 1.0
    assert parsed.reason(vector) == ""
    vector[labels.index("status/drink")] = 2
    assert parsed.reason(vector) == "status/drink 2 < 3"
    vector[labels.index("status/drink")], vector[labels.index("world/daylight")] = 3, 0.25
    assert parsed.reason(vector) == "world/daylight 0.25 < 0.5"  # 3 is not below 3
    (seen,) = parse_guards(backend, [common_pb2.Guard(skill="drink_up", max_frames=9, when=[
        common_pb2.Threshold(label="threat/seen", value=0.5, above=True)])], skills, 100)
    assert seen.reason(vector) == ""
    vector[labels.index("threat/seen")] = 1
    assert seen.reason(vector) == "threat/seen 1 > 0.5"
    assert parse_guards(backend, [], skills, 100) == ()


def test_every_problem_of_the_guards_is_said_at_once(skills: SkillRegistry) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_guards(CrafterBackend(), [guard(when=()), guard(max_frames=0), guard(when=(("status/thirst", 3),)),
                                        guard(when=(("status/drink", float("nan")),))], skills, 100)
    message = str(info.value)
    assert "guards[0].when is empty: say when the guard takes over" in message
    assert "guards[1].max_frames=0 must be in 1..100" in message
    assert ("guards[2].when[0].label 'status/thirst' is not a vector label of crafter: use one that Describe's vector "
            "field lists, e.g. status/health, status/food, status/drink") in message
    assert "guards[3].when[0].value must be a finite number" in message


def test_a_missing_skill_is_named_and_a_skill_of_another_backend_refused(skills: SkillRegistry) -> None:
    with pytest.raises(NotFound, match=r"guards\[1\].skill: no skill named 'fly'; register it first"):
        parse_guards(CrafterBackend(), [guard(), guard(skill="fly")], skills, 100)
    with pytest.raises(InvalidArgument, match=r"guards\[0\]: skill 'dig' was written for minedojo, not crafter"):
        parse_guards(CrafterBackend(), [guard(skill="dig")], skills, 100)
