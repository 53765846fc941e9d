"""Describe's game facts that clients would otherwise type by hand, filled by each backend from its game: the
display name, what the actions do (moves, idle, interact), the stack limit, the observation scales and K's
default."""

from __future__ import annotations

from typing import Any

from rlgpt.v1 import env_pb2
from services.env_server.describe import describe
from services.env_server.settings import EnvServerSettings


def roles_name_actions(served: env_pb2.DescribeResponse) -> None:
    roles = served.action_roles
    assert roles.move and set(roles.move) <= set(served.actions)
    assert roles.idle in served.actions and roles.interact in served.actions
    assert roles.idle not in roles.move and roles.interact not in roles.move


def scales(served: env_pb2.DescribeResponse) -> dict[str, float]:
    return {f.name: f.scale for f in served.observation}


def test_crafter_serves_its_name_roles_stack_limit_and_scales_from_the_game() -> None:
    served = describe("crafter", EnvServerSettings(default_skill_steps=12))
    roles_name_actions(served)
    assert served.display_name == "Crafter"
    assert list(served.action_roles.move) == ["move_left", "move_right", "move_up", "move_down"]
    assert (served.action_roles.idle, served.action_roles.interact) == ("noop", "do")
    # data.yaml: every item and status runs 0..9; the collect rules use the interact action.
    assert served.stack_limit == max(i.max for i in served.rules.items) == 9
    assert {r.action for r in served.rules.collect} == {served.action_roles.interact}
    assert scales(served) == {"image": 255.0, "vector": 10.0}  # what the learner's model divided by before
    assert served.limits.default_skill_steps == 12  # K's one default: the env server's setting


def test_minedojo_serves_them_from_its_api_and_data(fake: Any) -> None:
    served = describe("minedojo", EnvServerSettings())
    assert served.available, served.unavailable_reason
    roles_name_actions(served)
    assert served.display_name == "Minecraft (MineDojo)"
    assert (served.action_roles.idle, served.action_roles.interact) == ("noop", "attack")
    assert {"forward", "camera_left"} <= set(served.action_roles.move)
    assert served.stack_limit == max(i.max for i in served.rules.items) == 64  # the data's stackSize
    assert scales(served)["vector"] > 0
