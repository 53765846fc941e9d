import json

import numpy as np

from services.env_server.backends.crafter import VECTOR_LABELS, CrafterBackend


def test_reset_is_reproducible_per_seed() -> None:
    backend = CrafterBackend()
    a, b = backend.make_env(), backend.make_env()
    img_a, vec_a = a.reset(42)
    img_b, vec_b = b.reset(42)
    assert np.array_equal(img_a, img_b) and np.array_equal(vec_a, vec_b)
    for action in [1, 3, 5, 2, 4] * 20:
        sa, sb = a.step(action), b.step(action)
        assert np.array_equal(sa.image, sb.image)
    assert not np.array_equal(a.reset(43)[0], b.reset(42)[0])


def test_shapes_inventory_and_perception() -> None:
    env = CrafterBackend().make_env()
    image, vector = env.reset(0)
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8
    assert vector.shape == (len(VECTOR_LABELS),) and vector.dtype == np.float32
    env.give("wood", 4)
    assert env.inventory()["wood"] == 4
    _, vector = env.observe()
    assert vector[VECTOR_LABELS.index("inventory/wood")] == 4
    perception = env.perception()
    json.dumps(perception)
    assert len(perception["view"]) == 7 and len(perception["view"][0]) == 9
    assert perception["view"][3][4] == "player"
    assert env.death_cause() == "" and env.achievements() == set()


def test_death_is_detected_with_a_cause() -> None:
    env = CrafterBackend().make_env()
    env.reset(0)
    env._env._player.health = 0  # test hook: kill the player directly
    step = env.step(0)
    assert step.dead and env.death_cause() != ""
