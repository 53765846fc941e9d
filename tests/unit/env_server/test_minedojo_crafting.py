"""MineDojo's functional actions (craft/equip/place/destroy/drop) and the Table 1 tasks, against the stand-in
``fake_minedojo`` (Minecraft cannot run here): the 8-dim vectors the backend sends, what the stand-in's copy of
MineDojo's action wrapper and Malmo's handlers make of them."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest
from env_server_support import AbortingContext

from rlgpt.errors import InvalidArgument
from rlgpt.v1 import env_pb2
from services.env_server.backends.minedojo import (
    ACTIONS,
    MineDojoBackend,
    MineDojoEnv,
    MineDojoSettings,
    functional_action_to_minedojo,
)
from services.env_server.backends.minedojo_tasks import TABLE1_TASKS, task_spec, task_specs
from services.env_server.servicer import EnvServicer
from services.env_server.settings import EnvServerSettings
from services.env_server.tasks import parse_task

NOOP = [0, 0, 0, 12, 12, 0, 0, 0]


# `fake` (the stand-in installed as minedojo): tests/conftest.py


@pytest.fixture
def backend(fake: Any) -> MineDojoBackend:
    return MineDojoBackend(MineDojoSettings(image_height=24, image_width=32))


@pytest.fixture
def env(backend: MineDojoBackend) -> Any:
    env = backend.make_env()
    assert isinstance(env, MineDojoEnv)
    env.reset(7)
    yield env
    env.close()


def step(env: MineDojoEnv, backend: MineDojoBackend, name: str) -> np.ndarray:
    """Steps the named action; returns the 8-dim vector the MineDojo wrapper received."""
    env.step(backend.spec.actions.index(name))
    return env._env.actions[-1]


# --- the action list ---------------------------------------------------------------------------------
def test_functional_actions_follow_the_paper_actions(backend: MineDojoBackend, fake: Any) -> None:
    actions = backend.spec.actions
    assert actions[:36] == ACTIONS
    functional = actions[36:]
    assert functional[0] == "drop"
    crafts = [a.split(":")[1] for a in functional if a.startswith("craft:")]
    assert crafts and set(crafts) <= set(fake.mc.ALL_CRAFT_SMELT_ITEMS)  # MineDojo's own craft list
    assert {"craft:planks", "craft:stick", "craft:crafting_table", "craft:wooden_pickaxe", "craft:stone_pickaxe",
            "craft:furnace", "craft:stone"} <= set(functional)
    assert "place:crafting_table" in functional and "place:stick" not in functional  # only blocks are placed
    assert {"equip:wooden_pickaxe", "destroy:log"} <= set(functional)
    assert "craft:log" not in functional  # no recipe makes a log
    doc = backend.spec.skill_api
    assert all(f'"{verb}:<item>"' in doc for verb in ("craft", "equip", "place", "destroy"))
    assert "does nothing (a no-op tick)" in doc


# --- the vectors sent ----------------------------------------------------------------------------------
def test_craft_sends_functional_4_with_the_index_in_minedojo_craft_list(env: MineDojoEnv, backend: MineDojoBackend,
                                                                       fake: Any) -> None:
    sim = env._env.unwrapped
    for item, key in (("planks", "craft"), ("wooden_pickaxe", "craft_with_table"), ("stone", "smelt")):
        sent = step(env, backend, f"craft:{item}")
        expected = list(NOOP)
        expected[5], expected[6] = 4, fake.mc.ALL_CRAFT_SMELT_ITEMS.index(item)
        assert list(sent) == expected
        # The wrapper read it as MineDojo does: hand recipes "craft", table-only ones "craft_with_table", smelting.
        crafted = [a for a in sim.dict_actions if a.get(key, "none") != "none"]
        assert crafted[-1][key] == item


def test_slot_actions_name_the_first_slot_holding_the_item(env: MineDojoEnv, backend: MineDojoBackend) -> None:
    env.give("log", 1)  # slot 0
    env.give("crafting_table", 1)  # slot 1
    env.give("wooden_pickaxe", 1)  # slot 2
    assert list(step(env, backend, "equip:wooden_pickaxe")) == [0, 0, 0, 12, 12, 5, 0, 2]
    assert env.perception()["mainhand"] == "wooden_pickaxe"  # swapped into the main hand (slot 0)
    assert list(step(env, backend, "destroy:log")) == [0, 0, 0, 12, 12, 7, 0, 2]  # the log moved to slot 2
    assert env.inventory()["log"] == 0
    step(env, backend, "camera_down")
    step(env, backend, "camera_down")  # look at the ground ahead
    assert list(step(env, backend, "place:crafting_table")) == [0, 0, 0, 12, 12, 6, 0, 1]
    assert env.inventory()["crafting_table"] == 0
    assert env.perception()["nearby_crafting_table"] is True
    assert list(step(env, backend, "drop")) == [0, 0, 0, 12, 12, 2, 0, 0]
    assert env.inventory()["wooden_pickaxe"] == 0


def test_an_item_not_held_or_not_craftable_is_a_no_op(env: MineDojoEnv, backend: MineDojoBackend) -> None:
    for name in ("equip:wooden_pickaxe", "place:crafting_table", "destroy:stick"):
        assert list(step(env, backend, name)) == NOOP  # MineDojo's wrapper would raise on an empty slot
    before = env.inventory()
    sent = step(env, backend, "craft:wooden_pickaxe")  # no planks, no sticks, no table: Malmo crafts nothing
    assert sent[5] == 4 and env.inventory() == before


def test_functional_action_mapping_refuses_unknown_names() -> None:
    with pytest.raises(InvalidArgument, match="not in MineDojo's craft list"):
        functional_action_to_minedojo("craft:unobtainium", ["planks"], ["air"] * 36)
    with pytest.raises(InvalidArgument, match="unknown MineDojo action"):
        functional_action_to_minedojo("smash:log", ["planks"], ["air"] * 36)
    with pytest.raises(InvalidArgument, match="out of range"):
        MineDojoEnv.minedojo_action(_bare_env(), 10_000)


def _bare_env() -> MineDojoEnv:
    return MineDojoEnv(None, object, frozenset(), MineDojoSettings(), actions=(*ACTIONS, "drop"))


def test_the_crafting_chain_by_hand(env: MineDojoEnv, backend: MineDojoBackend) -> None:
    env.give("log", 3)
    for name in ("craft:planks", "craft:planks", "craft:planks", "craft:stick", "craft:crafting_table"):
        step(env, backend, name)
    assert env.inventory()["planks"] == 6 and env.inventory()["stick"] == 4
    step(env, backend, "craft:wooden_pickaxe")  # no table nearby: nothing happens
    assert env.inventory()["wooden_pickaxe"] == 0
    for name in ("camera_down", "camera_down", "place:crafting_table", "craft:wooden_pickaxe"):
        step(env, backend, name)
    assert env.inventory()["wooden_pickaxe"] == 1
    assert {"craft_planks", "craft_stick", "craft_crafting_table", "craft_wooden_pickaxe"} <= env.achievements()


# --- through the env server ----------------------------------------------------------------------------
def test_an_unknown_functional_action_is_refused_at_session_creation(fake: Any) -> None:
    servicer = EnvServicer(EnvServerSettings())
    context = AbortingContext()
    try:
        with pytest.raises(RuntimeError):
            servicer.CreateSession(env_pb2.CreateSessionRequest(
                backend="minedojo", num_envs=1, primitive_actions=["forward", "craft:unobtainium"]), context)
    finally:
        servicer.close()
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown primitive action 'craft:unobtainium' for minedojo" in context.details
    assert "craft:planks" in context.details  # the known ones are listed


# --- Table 1 tasks -------------------------------------------------------------------------------------
def test_table1_tasks_parse_against_the_backend(backend: MineDojoBackend) -> None:
    assert list(TABLE1_TASKS) == ["stick", "crafting_table", "wooden_pickaxe", "stone", "stone_pickaxe", "furnace",
                                  "bed"]
    for spec in task_specs():
        task = parse_task(spec, backend.spec)
        assert task.inventory and not task.open_ended and task.terminate_on_success
    assert parse_task(task_spec("stone"), backend.spec).inventory == (("cobblestone", 1),)
    with pytest.raises(KeyError, match="known: stick"):
        task_spec("diamond")
