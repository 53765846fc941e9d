"""Crafter (danijar/crafter): the default, embedded backend."""

from __future__ import annotations

from typing import Any

import crafter
import numpy as np
from crafter import constants, objects

from services.env_server.backends.base import Backend, BackendEnv, BackendSpec, RawStep
from services.env_server.backends.crafter_rules import INTERACT, STATUS, arrow_damage, crafter_rules
from services.env_server.skills.api_doc import CRAFTER_SKILL_API
from services.env_server.skills.navigation import OUT_OF_MAP, UNSEEN  # the view's words, as the agent reads them

ITEMS = tuple(name for name in constants.items if name not in STATUS)
VECTOR_LABELS = (
    *(f"status/{s}" for s in STATUS),
    *(f"inventory/{i}" for i in ITEMS),
    "facing/x", "facing/y", "status/sleeping", "world/daylight",
    "threat/seen", "threat/x", "threat/y",
)
VIEW_WIDTH, VIEW_HEIGHT = 9, 7  # the map part of Crafter's 9x9 view; 2 rows show the inventory
_OBJECT_NAMES = {objects.Cow: "cow", objects.Zombie: "zombie", objects.Skeleton: "skeleton",
                 objects.Arrow: "arrow", objects.Plant: "plant", objects.Fence: "fence",
                 objects.Player: "player"}
_THREATS = (objects.Zombie, objects.Skeleton, objects.Arrow)
"""What can hurt the player in Crafter (crafter objects: a zombie's hit, a skeleton's arrow)."""
VECTOR_DESCRIPTION = (
    "facing/x, facing/y: where the player faces (-1, 0 or 1; x right, y down); world/daylight: 1 by day, near 0 "
    f"at night; threat/seen: 1 while a threat ({', '.join(_OBJECT_NAMES[kind] for kind in _THREATS)}) is in the "
    "local view; threat/x, threat/y: the nearest one's offset in cells (0 when none)")
MOVES = tuple(a for a in constants.actions if a.startswith("move_"))
"""The actions that move the player: crafter's Player.update walks on every ``move_<direction>`` action."""
STACK_LIMIT = max(int(info["max"]) for name, info in constants.items.items() if name not in STATUS)
"""Most of one item the inventory holds (data.yaml's item maxima: 9)."""
VECTOR_SCALE = 1.0 + max(int(info["max"]) for info in constants.items.values())
"""One past the largest count or status value of data.yaml (0..9, so 10): what a network divides the vector by."""
_SKELETON_RANGE = 5  # skeletons shoot at a player this close (crafter objects.Skeleton.update)
_PALETTE_BASE = ord("A")  # remembered(): material id i is the character chr(_PALETTE_BASE + i)
_ARROW_DAMAGE = arrow_damage() or 0  # an arrow's hit, read from the game as the rules are (0: unknown, not noted)


class _DeterministicCrafter(crafter.Env):
    """crafter.Env whose creature balancing does not depend on memory addresses, without its unused semantic map.

    Crafter keeps each chunk's objects in a ``set`` and picks one to despawn by index, so two envs
    with the same seed diverge; sorting by position makes seeded episodes reproducible.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # crafter's step builds info["semantic"], a map of the whole view, every frame; nothing here reads it
        # (the server's own perception is built from the world), and it cost 2% of a step (make bench-env).
        self._sem_view = lambda: None

    def _balance_chunk(self, chunk: Any, objs: Any) -> None:
        super()._balance_chunk(chunk, sorted(objs, key=lambda o: (int(o.pos[0]), int(o.pos[1]))))


class CrafterEnv(BackendEnv):
    """One ``crafter.Env`` with gymnasium-style termination handled by the session."""

    def __init__(self) -> None:
        # length=None: the session truncates episodes itself, so it can tell truncated from terminated.
        self._env = _DeterministicCrafter(area=(64, 64), view=(9, 9), size=(64, 64), reward=True, length=None, seed=0)
        self._last_image: np.ndarray | None = None
        self._arrow_close = False
        self._in_view: list[tuple[int, int]] | None = None  # the threats in view, as the last vector saw them
        # The material of every cell the view has shown this episode, as last seen (-1: never seen), indexed like
        # the world's material map: what a skill started later remembers of the map (remembered()).
        self._seen = np.full((64, 64), -1, dtype=np.int16)

    @property
    def _player(self) -> objects.Player:
        return self._env._player

    def reset(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        # Crafter seeds world generation with hash((seed, episode)); pinning both makes resets reproducible.
        self._env._seed = int(seed)
        self._env._episode = 0
        self._arrow_close = False
        self._in_view = None
        self._last_image = self._env.reset()
        self._seen = np.full(self._env._world.area, -1, dtype=np.int16)
        self._see()
        return self._last_image, self._vector()

    def _see(self) -> None:
        """The view's materials remembered (creatures and objects move or go: only the ground is kept)."""
        world = self._env._world
        x, y = (int(v) for v in self._player.pos)
        xs = slice(max(0, x - VIEW_WIDTH // 2), min(world.area[0], x + VIEW_WIDTH // 2 + 1))
        ys = slice(max(0, y - VIEW_HEIGHT // 2), min(world.area[1], y + VIEW_HEIGHT // 2 + 1))
        self._seen[xs, ys] = world._mat_map[xs, ys]

    def remembered(self) -> dict[str, Any] | None:
        names = self._env._world._mat_names  # material id -> name (0: none)
        palette = [names.get(i) or UNSEEN for i in range(max(names) + 1)]
        chars = np.where(self._seen < 0, ord(" "), self._seen + _PALETTE_BASE).astype(np.uint8).T  # [y][x]
        rows = [row.tobytes().decode("ascii") for row in chars]
        return {"palette": palette, "rows": rows, "first": _PALETTE_BASE}

    def step(self, action: int) -> RawStep:
        # An arrow vanishes with its hit, and a skeleton may shoot from out of range: so the arrows about to hit
        # a player one hit from death are noted first (rarely: only at health 2 or less).
        player = self._player
        self._arrow_close = player.health <= _ARROW_DAMAGE and any(
            isinstance(o, objects.Arrow) and player.distance(o) <= 2 for o in self._nearby(tuple(player.pos), 2)[1])
        self._in_view = None
        image, reward, _done, _info = self._env.step(action)
        self._last_image = image
        self._see()
        return RawStep(image=image, vector=self._vector(), native_reward=float(reward),
                       dead=self._player.health <= 0)

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        self._last_image = self._env.render()
        return self._last_image, self._vector()

    def _vector(self) -> np.ndarray:
        player = self._player
        inv = player.inventory
        self._in_view = self._threats(VIEW_WIDTH // 2, VIEW_HEIGHT // 2)
        threat = [1.0, *self._in_view[0]] if self._in_view else [0.0, 0.0, 0.0]
        return np.array(
            [inv[s] for s in STATUS] + [inv[i] for i in ITEMS]
            + [player.facing[0], player.facing[1], float(player.sleeping), self._env._world.daylight, *threat],
            dtype=np.float32)

    def _threats(self, across: int, down: int) -> list[tuple[int, int]]:
        """Offsets (x right, y down) of the threats at most ``across`` cells left or right and ``down`` up or
        down of the player, nearest first (by the larger axis distance, then the sum; ties by position)."""
        world = self._env._world
        x, y = int(self._player.pos[0]), int(self._player.pos[1])
        width, height = world.area
        # Every frame builds the vector: read the object map's ids alone (one object per cell), clamped to the map
        # (a negative start would wrap), not _nearby's unique materials too (they cost twice as much again).
        ids = world._obj_map[max(0, x - across):min(width, x + across + 1), max(0, y - down):min(height, y + down + 1)]
        objs = [world._objects[i] for i in ids[ids > 0].tolist()]
        offsets = [(int(o.pos[0]) - x, int(o.pos[1]) - y) for o in objs if isinstance(o, _THREATS)]
        return sorted(offsets, key=lambda d: (max(abs(d[0]), abs(d[1])), abs(d[0]) + abs(d[1]), d))

    def inventory(self) -> dict[str, int]:
        inv = self._player.inventory
        return {item: int(inv[item]) for item in ITEMS}

    def give(self, item: str, count: int) -> None:
        maximum = constants.items[item]["max"]
        self._player.inventory[item] = min(maximum, self._player.inventory[item] + count)

    def achievements(self) -> set[str]:
        return {name for name, count in self._player.achievements.items() if count > 0}

    def health(self) -> float:
        return float(self._player.health)

    def _inside(self, pos: tuple[int, int]) -> bool:
        width, height = self._env._world.area
        return 0 <= pos[0] < width and 0 <= pos[1] < height

    def _cell_name(self, pos: tuple[int, int]) -> str:
        if not self._inside(pos):
            return OUT_OF_MAP
        material, obj = self._env._world[pos]
        if obj is not None:
            return _OBJECT_NAMES.get(type(obj), "object")
        return material or UNSEEN

    def _nearby(self, pos: tuple[int, int], distance: int) -> tuple[set[str], list[Any]]:
        """Materials and objects within ``distance`` (a square), clamped to the map.

        crafter's World.nearby slices its arrays with ``x - distance``, which for a player near the
        left or top edge is a negative index: numpy then returns an empty or wrapped slice.
        """
        world = self._env._world
        width, height = world.area
        x, y = int(pos[0]), int(pos[1])
        xs = slice(max(0, x - distance), min(width, x + distance + 1))
        ys = slice(max(0, y - distance), min(height, y + distance + 1))
        materials = {world._mat_names[i] for i in np.unique(world._mat_map[xs, ys]).tolist()}
        objs = [world._objects[i] for i in np.unique(world._obj_map[xs, ys]).tolist() if i > 0]
        return materials, [o for o in objs if o is not None]

    def perception(self) -> dict[str, Any]:
        player = self._player
        px, py = int(player.pos[0]), int(player.pos[1])
        x0, y0 = px - VIEW_WIDTH // 2, py - VIEW_HEIGHT // 2
        view = [[self._cell_name((x0 + dx, y0 + dy)) for dx in range(VIEW_WIDTH)] for dy in range(VIEW_HEIGHT)]
        inv = player.inventory
        return {
            "position": [px, py],
            "facing": [int(player.facing[0]), int(player.facing[1])],
            "view": view,
            "view_origin": [x0, y0],
            "inventory": {item: int(inv[item]) for item in ITEMS},
            "status": {s: int(inv[s]) for s in STATUS},
            "sleeping": bool(player.sleeping),
            "daylight": float(self._env._world.daylight),
            "achievements": sorted(name for name, count in player.achievements.items() if count > 0),
            "area": list(self._env._world.area),
        }

    def nearby_text(self) -> str:
        player = self._player
        materials, objs = self._nearby(tuple(player.pos), 3)
        names = sorted({m for m in materials if m and m not in ("grass", "path", "sand")}
                       | {_OBJECT_NAMES.get(type(o), "object") for o in objs if o is not player})
        edges = self._edges(tuple(player.pos), 3)
        if edges:
            names.append("the map edge (" + ", ".join(edges) + ")")
        return ", ".join(names) if names else "nothing notable"

    def _edges(self, pos: tuple[int, int], distance: int) -> list[str]:
        """Which map edges lie within ``distance`` cells of ``pos``."""
        width, height = self._env._world.area
        x, y = int(pos[0]), int(pos[1])
        sides = (("left", x - distance < 0), ("right", x + distance >= width),
                 ("top", y - distance < 0), ("bottom", y + distance >= height))
        return [side for side, near in sides if near]

    def threat_distance(self, within: int) -> int | None:
        # crafter's own Object.distance is the sum of the axis distances; the session's is the larger one. Within
        # the view the vector's list (built after the same frame, nearest first) answers without a second look.
        in_view = within <= min(VIEW_WIDTH, VIEW_HEIGHT) // 2 and self._in_view is not None
        nearest = self._in_view[:1] if in_view else self._threats(within, within)[:1]
        distance = max(abs(nearest[0][0]), abs(nearest[0][1])) if nearest else None
        return distance if distance is not None and distance <= within else None

    def death_cause(self) -> str:
        player = self._player
        if player.health > 0:
            return ""
        if self._env._world[player.pos][0] == "lava":
            return "lava"
        inv = player.inventory
        causes = []
        _materials, objs = self._nearby(tuple(player.pos), _SKELETON_RANGE)
        # A zombie hits from an adjacent cell; an arrow hits and vanishes, so its skeleton is the trace.
        if any(isinstance(o, objects.Zombie) and player.distance(o) <= 1 for o in objs):
            causes.append("attacked by zombie" + (" while sleeping" if player.sleeping else ""))
        if self._arrow_close or any(isinstance(o, objects.Arrow) and player.distance(o) <= 2 for o in objs) or any(
                isinstance(o, objects.Skeleton) and player.distance(o) <= _SKELETON_RANGE for o in objs):
            causes.append("shot by skeleton")
        starving = [s for s in ("food", "drink", "energy") if inv[s] <= 0]
        if starving:
            causes.append("no " + " and no ".join(starving))
        return " and ".join(causes) if causes else "unknown"


class CrafterBackend(Backend):
    """Factory of Crafter envs."""

    spec = BackendSpec(
        name="crafter",
        actions=tuple(constants.actions),
        achievements=tuple(constants.achievements),
        items=ITEMS,
        image_shape=(64, 64, 3),
        vector_labels=VECTOR_LABELS,
        vector_description=VECTOR_DESCRIPTION,
        default_episode_length=10000,
        skill_api=CRAFTER_SKILL_API,
        noop_action=constants.actions.index("noop"),  # crafter's Player.update does nothing on "noop"
        rules=crafter_rules,
        threats=tuple(_OBJECT_NAMES[kind] for kind in _THREATS),
        display_name="Crafter",
        move_actions=MOVES,
        interact_action=INTERACT,
        stack_limit=STACK_LIMIT,
        vector_scale=VECTOR_SCALE,
        game_task="crafter",  # Crafter's benchmark: the score over the 22 achievements
    )

    def make_env(self) -> BackendEnv:
        return CrafterEnv()
