"""The MineDojo backend against a stand-in of the minedojo package (Minecraft cannot run here).

``fake_minedojo`` mimics MineDojo's make/reset/step signatures and observation layout (see its
docstring); these tests check the backend's own logic, not Minecraft's behaviour.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fakes import fake_minedojo

from rlgpt.errors import FailedPrecondition, InvalidArgument
from services.env_server.backends import base
from services.env_server.backends.minedojo import (
    ACHIEVEMENTS,
    ACTIONS,
    ITEMS,
    VECTOR_LABELS,
    MineDojoBackend,
    MineDojoEnv,
    MineDojoSettings,
    functional_actions,
    paper_action_to_minedojo,
)

SMALL = {"image_height": 24, "image_width": 32}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Installs the stand-in as ``minedojo`` (and ``minedojo.sim``, ``minedojo.sim.mc_meta.mc``) for one test."""
    fake_minedojo.install(monkeypatch)
    return fake_minedojo


def make_env(fake: Any, **settings: Any) -> MineDojoEnv:
    backend = MineDojoBackend(MineDojoSettings(**{**SMALL, **settings}))
    env = backend.make_env()
    assert isinstance(env, MineDojoEnv)
    return env


@pytest.fixture
def env(fake: Any) -> Iterator[MineDojoEnv]:
    env = make_env(fake)
    env.reset(7)
    yield env
    env.close()


def sim_of(env: MineDojoEnv) -> Any:
    return env._env.unwrapped


def wrapper_of(env: MineDojoEnv) -> Any:
    return env._env


# --- actions ----------------------------------------------------------------------------------------
MOVE_EXPECTED = {
    0: {}, 1: {0: 1}, 2: {0: 2}, 3: {1: 1}, 4: {1: 2}, 5: {2: 1}, 6: {2: 2}, 7: {2: 3},
    8: {3: 10}, 9: {3: 14}, 10: {4: 10}, 11: {4: 14},
}
FUNCTIONAL_EXPECTED = {0: {}, 1: {5: 1}, 2: {5: 3}}


@pytest.mark.parametrize("index", range(36))
def test_every_paper_action_maps_to_minedojo(index: int) -> None:
    move, functional = divmod(index, 3)
    expected = np.array([0, 0, 0, 12, 12, 0, 0, 0])
    for position, value in {**MOVE_EXPECTED[move], **FUNCTIONAL_EXPECTED[functional]}.items():
        expected[position] = value
    action = paper_action_to_minedojo(index)
    assert action.shape == (8,) and action.dtype == np.int64
    np.testing.assert_array_equal(action, expected)
    assert np.all(action < np.array(fake_minedojo.ACTION_NVEC))


def test_named_actions() -> None:
    assert len(ACTIONS) == 36 and len(set(ACTIONS)) == 36
    np.testing.assert_array_equal(paper_action_to_minedojo(ACTIONS.index("noop")), [0, 0, 0, 12, 12, 0, 0, 0])
    assert paper_action_to_minedojo(ACTIONS.index("attack"))[5] == 3
    assert paper_action_to_minedojo(ACTIONS.index("use"))[5] == 1
    assert list(paper_action_to_minedojo(ACTIONS.index("forward+attack"))) == [1, 0, 0, 12, 12, 3, 0, 0]
    assert list(paper_action_to_minedojo(ACTIONS.index("camera_left+use"))) == [0, 0, 0, 12, 10, 1, 0, 0]
    for bad in (-1, 36):
        with pytest.raises(InvalidArgument):
            paper_action_to_minedojo(bad)


def test_camera_actions_turn_the_view_by_30_degrees(env: MineDojoEnv) -> None:
    _image, vector = env.observe()
    yaw = VECTOR_LABELS.index("facing/yaw")
    pitch = VECTOR_LABELS.index("facing/pitch")
    start_yaw, start_pitch = vector[yaw], vector[pitch]
    vector = env.step(ACTIONS.index("camera_right")).vector
    assert vector[yaw] == pytest.approx(start_yaw + 30)
    vector = env.step(ACTIONS.index("camera_up")).vector
    assert vector[pitch] == pytest.approx(start_pitch - 30)


def test_steps_send_the_mapped_action(env: MineDojoEnv) -> None:
    for name in ("noop", "forward+attack", "jump+use", "camera_down"):
        env.step(ACTIONS.index(name))
        np.testing.assert_array_equal(wrapper_of(env).actions[-1], paper_action_to_minedojo(ACTIONS.index(name)))


# --- spec -------------------------------------------------------------------------------------------
def test_spec_is_consistent(fake: Any) -> None:
    backend = MineDojoBackend(MineDojoSettings(**SMALL))
    spec = backend.spec
    assert spec.name == "minedojo"
    assert spec.actions[:36] == ACTIONS and spec.actions[36:] == functional_actions(fake.mc)
    assert len(set(spec.actions)) == len(spec.actions)
    assert spec.actions[spec.noop_action] == "noop"
    assert spec.image_shape == (24, 32, 3)
    assert len(set(spec.vector_labels)) == len(spec.vector_labels)
    assert len(set(spec.achievements)) == len(spec.achievements) == len(ACHIEVEMENTS)
    assert set(spec.items) <= set(fake.ALL_ITEMS)
    assert spec.default_episode_length == 1000
    assert "agent.inventory" in spec.skill_api and "forward+attack" in spec.skill_api
    env = backend.make_env()
    image, vector = env.reset(1)
    assert image.shape == spec.image_shape
    assert vector.shape == (len(spec.vector_labels),)
    env.close()


def test_settings_come_from_environment(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLGPT_MINEDOJO_IMAGE_HEIGHT", "40")
    monkeypatch.setenv("RLGPT_MINEDOJO_TASK_ID", "harvest_1_log")
    backend = MineDojoBackend()
    assert backend.spec.image_shape == (40, 256, 3)
    assert backend.settings.task_id == "harvest_1_log"


# --- reset and step ---------------------------------------------------------------------------------
def test_reset_is_deterministic_per_seed(fake: Any) -> None:
    a, b = make_env(fake, world_count=4), make_env(fake, world_count=4)
    image_a, vector_a = a.reset(5)
    a.step(ACTIONS.index("forward"))
    image_a2, vector_a2 = a.reset(5)
    image_b, vector_b = b.reset(5)
    np.testing.assert_array_equal(image_a, image_a2)
    np.testing.assert_array_equal(vector_a, vector_a2)
    np.testing.assert_array_equal(image_a, image_b)
    np.testing.assert_array_equal(vector_a, vector_b)
    image_c, _vector_c = a.reset(6)  # another world
    assert not np.array_equal(image_a, image_c)


def test_the_env_is_remade_only_when_its_world_changes(fake: Any) -> None:
    env = make_env(fake, world_seed=100, world_count=2)
    for seed in (0, 2, 4):  # all world 100
        env.reset(seed)
    assert len(fake.MAKE_CALLS) == 1
    call = fake.MAKE_CALLS[0]
    assert call["task_id"] == "open-ended"
    assert call["world_seed"] == "100" and call["seed"] == 0
    assert call["image_size"] == (24, 32)
    assert call["use_voxel"] is True and call["regenerate_world_after_reset"] is True
    first = env._env
    env.reset(1)  # world 101
    assert len(fake.MAKE_CALLS) == 2 and fake.MAKE_CALLS[1]["world_seed"] == "101"
    assert first.unwrapped.closed


def test_world_seed_zero_is_passed_as_a_string(fake: Any) -> None:
    # MineDojo replaces a falsy world_seed by a random world; "0" is truthy.
    make_env(fake).reset(0)
    assert fake.MAKE_CALLS[0]["world_seed"] == "0"


def test_programmatic_tasks_get_no_repeated_spec_arguments(fake: Any) -> None:
    env = make_env(fake, task_id="harvest_milk_with_empty_bucket_and_cow")
    env.reset(3)  # the stand-in raises TypeError on a repeated keyword, as MineDojo does
    call = fake.MAKE_CALLS[0]
    assert "use_voxel" not in call and "regenerate_world_after_reset" not in call
    assert env.inventory()["bucket"] == 1


def test_step_returns_hwc_uint8_and_float32(env: MineDojoEnv) -> None:
    raw = env.step(ACTIONS.index("forward"))
    assert raw.image.shape == (24, 32, 3) and raw.image.dtype == np.uint8
    assert raw.image.flags["C_CONTIGUOUS"]
    assert raw.vector.dtype == np.float32 and raw.vector.shape == (len(VECTOR_LABELS),)
    assert isinstance(raw.native_reward, float)
    assert raw.dead is False and raw.backend_done is False
    rgb = sim_of(env).prev_obs["rgb"]
    np.testing.assert_array_equal(raw.image, rgb.transpose(1, 2, 0))
    life = VECTOR_LABELS.index("status/life")
    assert raw.vector[life] == 20.0


def test_used_before_reset_is_a_failed_precondition(fake: Any) -> None:
    env = make_env(fake)
    with pytest.raises(FailedPrecondition):
        env.observe()
    with pytest.raises(FailedPrecondition):
        env.step(0)


def test_backend_done_when_minedojo_ends_the_episode(env: MineDojoEnv) -> None:
    sim_of(env).end_episode()
    raw = env.step(0)
    assert raw.backend_done is True and raw.dead is False


def test_native_reward_of_a_programmatic_task(fake: Any) -> None:
    env = make_env(fake, task_id="harvest_milk_with_empty_bucket_and_cow")
    env.reset(3)  # the stand-in spawns the cow 2-2.5 blocks straight ahead
    raw = env.step(ACTIONS.index("use"))
    assert raw.native_reward == 1.0 and raw.backend_done is True
    assert env.inventory()["milk_bucket"] == 1
    assert "collect_milk" in env.achievements()


# --- give, inventory, achievements ------------------------------------------------------------------
def test_give_uses_replaceitem_through_set_inventory(env: MineDojoEnv) -> None:
    env.give("log", 3)
    env.give("stick", 70)  # more than a stack: two slots
    env.give("log", 2)  # tops up the existing stack
    commands = sim_of(env).commands
    assert commands[0] == "/replaceitem entity @p slot.weapon.mainhand minecraft:log 3 0"
    assert any(c.endswith("minecraft:stick 64 0") for c in commands)
    assert any(c.endswith("minecraft:stick 6 0") for c in commands)
    assert commands[-1] == "/replaceitem entity @p slot.weapon.mainhand minecraft:log 5 0"
    assert env.inventory()["log"] == 5 and env.inventory()["stick"] == 70
    _image, vector = env.observe()
    assert vector[VECTOR_LABELS.index("inventory/log")] == 5
    assert env.achievements() == set()  # start conditions unlock nothing


def test_give_rejects_unknown_items_and_unstackables_take_one_slot_each(env: MineDojoEnv) -> None:
    with pytest.raises(InvalidArgument):
        env.give("unobtainium", 1)
    env.give("wooden_pickaxe", 2)
    assert sum(c.endswith("minecraft:wooden_pickaxe 1 0") for c in sim_of(env).commands) == 2
    assert env.inventory()["wooden_pickaxe"] == 2


def test_achievements_latch_for_the_episode(env: MineDojoEnv) -> None:
    sim = sim_of(env)
    sim.set_block("wood", 0, 1, 1)  # a trunk straight ahead at eye level (yaw 0 faces +z)
    for _ in range(3):
        env.step(ACTIONS.index("attack"))
    assert env.inventory()["log"] == 1
    assert "collect_log" in env.achievements()
    sim.execute_cmd("/clear")  # the log is gone again
    env.step(0)
    assert env.inventory()["log"] == 0
    assert "collect_log" in env.achievements()
    env.reset(7)
    assert env.achievements() == set()


def test_near_crafting_table(env: MineDojoEnv) -> None:
    sim_of(env).set_block("crafting table", 2, 0, 0)
    env.step(0)
    assert "near_crafting_table" in env.achievements()
    assert env.perception()["nearby_crafting_table"] is True
    assert "crafting_table" in env.nearby_text()


# --- death ------------------------------------------------------------------------------------------
def test_alive_has_no_death_cause(env: MineDojoEnv) -> None:
    assert env.death_cause() == ""
    assert env.health() == 20.0


def test_death_in_lava(env: MineDojoEnv) -> None:
    sim_of(env).set_block("lava", 0, 0, 0)
    raw = None
    for _ in range(5):
        raw = env.step(0)
        if raw.dead:
            break
    assert raw is not None and raw.dead is True and raw.backend_done is False
    assert env.health() == 0.0
    assert env.death_cause() == "lava"


def test_death_by_a_mob_and_by_drowning(fake: Any) -> None:
    env = make_env(fake)
    env.reset(1)
    sim_of(env).hurt(25.0, damage_distance=1.5)
    assert env.step(0).dead is True
    assert env.death_cause() == "attacked by a mob"
    env.reset(1)
    assert env.step(0).dead is False
    sim = sim_of(env)
    sim.oxygen = 0.0
    sim.hurt(25.0)
    env.step(0)
    assert env.death_cause() == "drowned"


# --- perception -------------------------------------------------------------------------------------
def test_perception_is_json_data(env: MineDojoEnv) -> None:
    sim_of(env).spawn("cow", distance=4.0, bearing=0.0)
    env.give("bucket", 1)
    env.step(0)
    perception = env.perception()
    decoded = json.loads(json.dumps(perception))
    assert decoded == perception
    assert len(perception["position"]) == 3
    assert perception["inventory"]["bucket"] == 1 and perception["inventory_all"] == {"bucket": 1}
    assert perception["mainhand"] == "bucket"
    voxels = perception["voxels"]
    assert len(voxels) == 3 and all(len(plane) == 3 and all(len(row) == 3 for row in plane) for plane in voxels)
    assert voxels[1][0][1] == "grass_block"  # the block under the feet, space replaced
    assert perception["entities_in_sight"]["cow"]["distance"] == pytest.approx(4.0, abs=0.1)
    assert abs(perception["entities_in_sight"]["cow"]["yaw"]) <= 7.5
    assert "cow (4m)" in env.nearby_text()


def test_threats_are_the_hostile_mobs_in_sight_within_the_distance(env: MineDojoEnv) -> None:
    noop = ACTIONS.index("noop")
    sim_of(env).spawn("cow", distance=2.0, bearing=0.0)
    env.step(noop)
    assert env.threat_distance(8) is None  # a cow is no threat
    sim_of(env).entities.clear()  # one lidar ray, straight ahead: it sees the nearest entity only
    sim_of(env).spawn("zombie", distance=3.0, bearing=0.0)
    env.step(noop)
    assert env.threat_distance(8) == 3 and env.threat_distance(2) is None
    # Turned 45 degrees, a zombie 2.8 blocks straight ahead is 2 blocks away along x and z: the larger axis
    # distance, as Describe's limit and the fast agent's prompt count it (not the straight line, 3 rounded up).
    sim_of(env).entities.clear()
    sim_of(env).yaw = 45.0
    sim_of(env).spawn("zombie", distance=2 * math.sqrt(2), bearing=0.0)
    env.step(noop)
    assert env.threat_distance(8) == 2 and env.threat_distance(1) is None


def test_nearby_text_without_anything_notable(fake: Any) -> None:
    env = make_env(fake, task_id="harvest_1_log")  # spec sets use_lidar: false
    env.reset(2)
    sim = sim_of(env)
    sim.edits.update({(x, y, z): "air" for x in range(-80, 80) for y in (64, 65, 66, 67)
                      for z in range(int(sim.pos[2]) - 3, int(sim.pos[2]) + 4)})
    env.step(0)
    assert env.nearby_text() == "nothing notable"
    assert env.perception()["entities_in_sight"] == {}


# --- registry ---------------------------------------------------------------------------------------
def test_missing_minedojo_is_a_failed_precondition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "minedojo", None)  # makes `import minedojo` raise ImportError
    monkeypatch.setattr(base, "_loaded", {})
    with pytest.raises(FailedPrecondition) as caught:
        base.get_backend("minedojo")
    message = str(caught.value)
    assert "minedojo" in message and "not available" in message


def test_registry_loads_the_backend_when_minedojo_imports(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_loaded", {})
    backend = base.get_backend("minedojo")
    assert isinstance(backend, MineDojoBackend)
    assert backend.spec.items == ITEMS
