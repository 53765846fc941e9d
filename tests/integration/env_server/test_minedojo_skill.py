"""A crafting skill run through the env server on MineDojo's stand-in ``fake_minedojo`` (Minecraft cannot run here):
the skill runs in the env server's sandbox workers."""

from __future__ import annotations

from typing import Any

import pytest
from env_server_support import AbortingContext

from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.backends.minedojo_tasks import task_spec
from services.env_server.servicer import EnvServicer
from services.env_server.settings import EnvServerSettings

# `fake` (the stand-in installed as minedojo): tests/conftest.py


CRAFTING_SKILL = '''
def craft_wooden_pickaxe(agent):
    while agent.inventory["planks"] < 9:
        yield "craft:planks"
    yield "craft:stick"
    yield "craft:crafting_table"
    while agent.pitch < 45:
        yield "camera_down"
    yield "place:crafting_table"
    yield "craft:wooden_pickaxe"
'''


def test_a_skill_crafts_a_wooden_pickaxe_from_logs(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLGPT_MINEDOJO_IMAGE_HEIGHT", "24")
    monkeypatch.setenv("RLGPT_MINEDOJO_IMAGE_WIDTH", "32")
    servicer = EnvServicer(EnvServerSettings())
    try:
        servicer.RegisterSkill(env_pb2.RegisterSkillRequest(
            name="craft_wooden_pickaxe", description="planks, sticks, table, pickaxe", code=CRAFTING_SKILL,
            backend="minedojo"), AbortingContext())
        task = task_spec("wooden_pickaxe")
        task.start_inventory.append(common_pb2.ItemCount(item="log", count=3))
        response = servicer.RunSkill(env_pb2.RunSkillRequest(
            skill="craft_wooden_pickaxe", backend="minedojo", task=task, seed=1, episodes=1, max_steps=50),
            AbortingContext())
    finally:
        servicer.close()
    [episode] = response.episodes
    assert response.success_rate == 1.0, episode
    assert not episode.HasField("error") or not episode.error.kind


# --- Table 1 tasks -------------------------------------------------------------------------------------
