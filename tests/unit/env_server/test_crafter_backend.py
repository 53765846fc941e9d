import json

import numpy as np
from crafter import objects

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


def test_the_unused_semantic_map_is_not_built_and_the_image_still_is() -> None:
    env = CrafterBackend().make_env()
    env.reset(0)
    image, _reward, _done, info = env._env.step(0)
    assert info["semantic"] is None and image.shape == (64, 64, 3) and image.any()


def test_death_is_detected_with_a_cause() -> None:
    env = CrafterBackend().make_env()
    env.reset(0)
    env._env._player.health = 0  # test hook: kill the player directly
    step = env.step(0)
    assert step.dead and env.death_cause() != ""


def test_an_arrow_that_kills_is_named_though_it_vanished_and_its_skeleton_is_out_of_range() -> None:
    env = CrafterBackend().make_env()
    env.reset(0)
    world, player = env._env._world, env._player
    x, y = (int(v) for v in player.pos)
    for cx in range(x - 6, x + 7):
        for cy in range(y - 6, y + 7):
            if (cx, cy) != (x, y):
                obj = world[(cx, cy)][1]
                if obj is not None:
                    world.remove(obj)
                world[(cx, cy)] = "grass"
    world.add(objects.Arrow(world, np.array([x - 1, y]), np.array([1, 0])))  # about to hit from the left
    player.health = 2
    step = env.step(0)
    assert step.dead and not any(isinstance(o, objects.Arrow) for o in env._nearby((x, y), 3)[1])
    assert env.death_cause() == "shot by skeleton"


def put_player(env, pos: tuple[int, int]) -> None:
    """Test hook: moves the player through crafter's World.move, which keeps the object map right."""
    env._env._world.move(env._player, pos)


def test_perception_at_the_map_edge_reads_out_of_map_and_lists_achievements() -> None:
    env = CrafterBackend().make_env()
    env.reset(0)
    put_player(env, (0, 33))  # seed 0: grass on the left edge
    perception = env.perception()
    assert perception["area"] == [64, 64] and perception["view_origin"] == [-4, 30]
    assert all(row[:4] == ["out_of_map"] * 4 for row in perception["view"])  # x = -4..-1, never wrapped
    assert perception["view"][3][4] == "player" and perception["view"][3][5] != "out_of_map"
    assert perception["achievements"] == []
    env._player.achievements["collect_wood"] = 1
    assert env.perception()["achievements"] == ["collect_wood"]


def test_death_cause_and_nearby_text_at_the_map_edge() -> None:
    from crafter import objects

    env = CrafterBackend().make_env()
    env.reset(0)
    put_player(env, (0, 33))
    world = env._env._world
    for obj in world.objects:  # keep the scene to what the test puts there
        if obj is not env._player:
            world.remove(obj)
    world.add(objects.Zombie(world, (1, 33), env._player))
    assert "zombie" in env.nearby_text() and "the map edge (left)" in env.nearby_text()
    env._player.health = 0
    # crafter's own World.nearby slices from x - 2 = -2 here and finds nothing: the cause read "unknown".
    assert world.nearby((0, 33), 2) == ((), set())
    assert env.death_cause() == "attacked by zombie"
    env._player.inventory["drink"] = 0
    assert env.death_cause() == "attacked by zombie and no drink"


def clear_scene(env) -> tuple[int, int]:
    """Test hook: only the player is left among the world's objects; its position."""
    world = env._env._world
    for obj in list(world.objects):
        if obj is not env._player:
            world.remove(obj)
    return int(env._player.pos[0]), int(env._player.pos[1])


def test_the_vector_shows_the_nearest_threat_in_view_and_its_offset() -> None:
    env = CrafterBackend().make_env()
    env.reset(0)
    x, y = clear_scene(env)
    seen, tx, ty = (VECTOR_LABELS.index(f"threat/{n}") for n in ("seen", "x", "y"))
    _, vector = env.observe()
    assert (vector[seen], vector[tx], vector[ty]) == (0, 0, 0)
    world = env._env._world
    world.add(objects.Cow(world, (x + 1, y)))  # a cow is no threat
    world.add(objects.Zombie(world, (x - 3, y + 2), env._player))
    world.add(objects.Zombie(world, (x + 4, y - 1), env._player))
    _, vector = env.observe()
    assert (vector[seen], vector[tx], vector[ty]) == (1, -3, 2)  # the nearer by the larger axis distance
    assert env.threat_distance(3) == 3 and env.threat_distance(2) is None
    world.add(objects.Skeleton(world, (x, y - 4), env._player))  # above the 7-row view, though 4 away
    world.remove(world[(x - 3, y + 2)][1])
    _, vector = env.observe()
    assert (vector[seen], vector[tx], vector[ty]) == (1, 4, -1)
    assert env.threat_distance(4) == 4  # the session's interrupt counts it, within 4 both ways


def test_the_threat_distance_after_a_frame_is_the_one_a_fresh_look_gives() -> None:
    # The session's interrupt check reads the list the frame's vector built; it must agree with looking again.
    env = CrafterBackend().make_env()
    env.reset(3)
    x, y = clear_scene(env)
    world = env._env._world
    for dx, dy in ((-3, 2), (4, -1), (0, -4), (2, 2), (-1, 0)):
        world.add(objects.Zombie(world, (x + dx, y + dy), env._player))
    answers = set()
    for frame in range(40):
        env.step(frame % 5)  # creatures move (and hit) between frames
        for within in range(1, 9):
            fresh = env._threats(within, within)[:1]
            expected = max(abs(fresh[0][0]), abs(fresh[0][1])) if fresh else None
            assert env.threat_distance(within) == expected, (frame, within)
            answers.add(expected)
    assert len(answers) > 2  # the scene changed the answer


def remembered_names(env) -> list[list[str | None]]:
    """The episode's remembered map as names per [y][x] (None where never seen)."""
    memory = env.remembered()
    return [[None if c == " " else memory["palette"][ord(c) - memory["first"]] for c in row] for row in memory["rows"]]


def test_the_episode_remembers_the_ground_of_every_cell_its_view_showed_and_forgets_it_at_reset() -> None:
    env = CrafterBackend().make_env()
    env.reset(5)
    first = env.perception()
    (x0, y0), names = first["view_origin"], remembered_names(env)
    seen = {(x, y) for y, row in enumerate(names) for x, name in enumerate(row) if name is not None}
    assert seen == {(x0 + dx, y0 + dy) for dy in range(7) for dx in range(9)}  # the first view, nothing else
    ground = {(x0 + dx, y0 + dy): name for dy, row in enumerate(first["view"]) for dx, name in enumerate(row)}
    assert all(names[y][x] == name for (x, y), name in ground.items() if name not in ("player", "cow", "zombie"))
    assert names[first["position"][1]][first["position"][0]] in ("grass", "sand", "path")  # the ground, not "player"
    for _ in range(12):  # walk left: the start's view stays remembered after it left the view
        env.step(1)
    now = env.perception()
    assert now["position"][0] < first["position"][0] - 4
    names = remembered_names(env)
    assert all(names[y][x] == ground[(x, y)] for (x, y) in ground
               if ground[(x, y)] not in ("player", "cow", "zombie") and not (now["view_origin"][0] <= x))
    assert sum(name is not None for row in names for name in row) > 63
    env.reset(5)
    assert sum(name is not None for row in remembered_names(env) for name in row) == 63
