"""MineDojo (real Minecraft): the paper's environment, behind the same Backend interface as Crafter.

What was not run here
---------------------
MineDojo was never installed or started while this module was written: its first start builds
Minecraft with Gradle (network) and needs Java 8, neither of which the development machine has.
Everything below was written against MineDojo's source code (github.com/MineDojo/MineDojo) and
exercised only against ``tests/unit/env_server/fake_minedojo.py``, a stand-in that mimics the
call signatures and observation layout read from that source. Timings, exact block/entity name
strings at runtime, Minecraft's tick lag and death/respawn behaviour are therefore unmeasured.

API facts checked in MineDojo's source
--------------------------------------
- ``minedojo.make(task_id, *args, cam_interval=15, **kwargs)`` (minedojo/tasks/__init__.py) returns
  ``ARNNWrapper(task_env)``, whose action space is MultiDiscrete([3, 3, 4, 25, 25, 8, 244, 36]) with
  no-op ``[0, 0, 0, 12, 12, 0, 0, 0]`` (sim/wrappers/ar_nn/nn_action_space_wrapper.py): camera bin b
  means ``b * cam_interval - 180`` degrees, functional 1 = use, 3 = attack.
- ``env.reset()`` returns obs; ``env.step(action)`` returns ``(obs, reward, done, info)``
  (sim/sim.py, tasks/meta/base.py). ``info`` is Malmo's raw JSON without "pov".
- Observation keys (sim/handlers/agent/observations/*): "rgb" uint8 (3, H, W); "inventory" dict of
  36-slot arrays "name" (underscores replaced by spaces, empty = "air"), "quantity", "variant", ...;
  "equipment" (same layout, 6 slots, index 0 = main hand); "life_stats" with "life", "food",
  "oxygen" (each shape (1,)), "armor", "saturation", "xp", "is_sleeping"; "location_stats" with
  "pos" (3,), "yaw" (1,), "pitch" (1,), "biome_id" (), ...; "nearby_tools" with "table", "furnace";
  "damage_source" with "is_fire_damage", "is_explosion", "is_projectile", "hunger_damage",
  "damage_distance", ...; "voxels" (only with ``use_voxel=True``) with "block_name" (3, 3, 3) in
  (x, y, z) order, names being Minecraft's lower-cased display names ("grass block", "wood",
  "water", "lava"); "rays" (only with ``use_lidar=True``) with "block_name", "block_distance",
  "entity_name" ("cow", "null" for none), "entity_distance", "ray_yaw".
- MineDojo has no "compass" observation of its own (CompassObservation exists but MineDojoSim never
  adds it). The paper's "compass" is MineAgent/Plan4MC's feature (cos, sin of yaw and pitch from
  location_stats), which is what the vector carries.
- The paper's MultiDiscrete([12, 3]) -> 8-dim mapping is Plan4MC's ``transform_action``
  (PKU-RL/Plan4MC envs/minecraft_hard_task.py): camera actions use bins 10 and 14, i.e. 30 degrees,
  not 15; index = move * 3 + functional (Plan4MC's ``action_process``).
- Items are given with ``set_inventory(inventory_list=[InventoryItem(slot, name, variant,
  quantity)])`` (sim/sim.py -> cmd_executor.py ``/replaceitem entity @p <slot> minecraft:<name>``).
  ``execute_cmd`` refuses ``/give`` (not in its list of valid commands), so this is the only
  runtime mechanism; ``initial_inventory`` exists only at make time.
- Functional actions (nn_action_space_wrapper.py ``action``/``step``): 2 drop, 4 craft with argument
  ``mc.ALL_CRAFT_SMELT_ITEMS[a[6]]`` (244 items in the real data: hand recipes go to Malmo's "craft",
  table-only ones to "craft_with_table", smelted ones to "smelt"), 5 equip / 6 place / 7 destroy with
  argument slot ``a[7]``, whose item the wrapper reads from the inventory names of the last observation
  *it* returned (strict check: an empty slot raises ValueError); destroy is ``set_inventory`` of air in
  that slot. After 2, 4, 5, 6, 7 the wrapper steps two more no-op ticks. Malmo: a craft without the
  ingredients crafts nothing (CraftingHelper.attemptCrafting); "craft_with_table" needs a crafting table
  within 5 blocks of the head and in view (NearbyCraftCommandsImplementation); equip/place of an item
  not held does nothing (EquipCommandsImplementation, PlaceCommandsImplementation).
- ``minedojo.sim`` exports ``InventoryItem`` and ``ALL_ITEMS`` (sim/__init__.py); the task wrappers
  are gym (0.22, requirements.txt) wrappers, so ``env.unwrapped`` is the MineDojoSim and
  ``env.seed(s)`` reaches ``MineDojoSim.seed``.
- ``world_seed`` falls back to a random world when falsy (``world_seed or ""``), so seed 0 is passed
  as the string "0". Programmatic task specs already set use_voxel/voxel_size/use_lidar/
  initial_inventory; passing them again raises TypeError (duplicate keyword), so they are passed
  only for the open-ended/meta tasks. ``regenerate_world_after_reset`` is a MineDojoSim argument
  that the Harvest/Combat/TechTree meta tasks do not accept.

Assumed, not verified
---------------------
- Whether a death ends MineDojo's episode or respawns the player: death is detected from
  ``life <= 0`` and, when Malmo reports them, ``info["is_dead"]`` / ``info["living_death_event_fired"]``
  (written by ObservationFromDamageImplementation.java; whether that producer is active is unknown).
- That an inventory change made by a command shows in the observation within two no-op ticks
  (MineDojo's own wrapper steps two no-ops after craft/equip/place for "malmo's lags").
- The sign of lidar yaw: Plan4MC notes "yaw in lidar is opposite" and negates it; so do we.
- give() runs /replaceitem on the MineDojoSim under the task layer, then steps no-op ticks through
  the whole wrapper stack (so the action wrapper's slot names see the gift), so on a programmatic task
  whose target is the given item, the task's own reward (computed from inventory increases) may count
  the gift in those ticks, which give() discards (and a task done in them is not seen either).
- That Malmo's "place" and the crafting table's "in view" test behave as read in the Java source;
  no functional action was ever sent to a real Minecraft.
- That the PyPI ``minedojo`` package installs on this project's Python (3.11+): MineDojo declares
  Python 3.9 and pins gym 0.22.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from rlgpt.config import Settings, setting
from rlgpt.errors import FailedPrecondition, InvalidArgument
from services.env_server.backends.base import Backend, BackendEnv, BackendSpec, RawStep
from services.env_server.backends.minedojo_rules import installed_minedojo_rules, stack_limit

log = logging.getLogger(__name__)

# --- actions ----------------------------------------------------------------------------------------
MINEDOJO_NOOP = (0, 0, 0, 12, 12, 0, 0, 0)
"""MineDojo's 8-dim no-op: move, strafe, jump/sneak/sprint, pitch bin, yaw bin, functional, craft arg, slot."""
CAMERA_NOOP_BIN = 12
CAMERA_STEP_BINS = 2
"""Camera bins per paper camera action: 2 bins x 15 degrees = 30 degrees, as in Plan4MC."""
FUNCTIONAL_USE = 1
FUNCTIONAL_DROP = 2
FUNCTIONAL_ATTACK = 3
FUNCTIONAL_CRAFT = 4
FUNCTIONAL_EQUIP = 5
FUNCTIONAL_PLACE = 6
FUNCTIONAL_DESTROY = 7
"""MineDojo's functional actions (dimension 5): 0 no-op, 1 use, 2 drop, 3 attack, 4 craft (argument: dimension
6, an index into ``mc.ALL_CRAFT_SMELT_ITEMS``), 5 equip, 6 place, 7 destroy (argument: dimension 7, an
inventory slot 0..35); sim/wrappers/ar_nn/nn_action_space_wrapper.py."""
CRAFT_ARG, SLOT_ARG = 6, 7

MOVE_ACTIONS = ("noop", "forward", "back", "strafe_left", "strafe_right", "jump", "sneak", "sprint",
                "camera_up", "camera_down", "camera_left", "camera_right")
"""First dimension of the paper's MultiDiscrete([12, 3])."""
FUNCTIONAL_ACTIONS = ("noop", "use", "attack")
"""Second dimension of the paper's MultiDiscrete([12, 3])."""


def _action_name(move: str, functional: str) -> str:
    if functional == "noop":
        return move
    return functional if move == "noop" else f"{move}+{functional}"


ACTIONS = tuple(_action_name(m, f) for m in MOVE_ACTIONS for f in FUNCTIONAL_ACTIONS)
"""The paper's Discrete(36): index = move * 3 + functional. The backend's action list starts with these."""
MOVES = ("forward", "back", "strafe_left", "strafe_right", "jump", "camera_left", "camera_right")
"""The actions that move the player: walking, jumping onto a block, turning (Describe's action_roles.move)."""
VECTOR_SCALE = 10.0
"""What a network divides the vector by: 10, as the learner's model always divided every backend's vector (life
and food run 0..20 here, stacks to 64, positions further; not tuned for MineDojo)."""
DROP = "drop"
CRAFT, EQUIP, PLACE, DESTROY = "craft", "equip", "place", "destroy"
ITEM_VERBS = {CRAFT: FUNCTIONAL_CRAFT, EQUIP: FUNCTIONAL_EQUIP, PLACE: FUNCTIONAL_PLACE, DESTROY: FUNCTIONAL_DESTROY}
"""``<verb>:<item>`` actions -> MineDojo functional action."""


def paper_action_to_minedojo(index: int) -> np.ndarray:
    """The MineDojo 8-dim action for one of the 36 flattened paper actions (Plan4MC's mapping)."""
    if not 0 <= int(index) < len(ACTIONS):
        raise InvalidArgument(f"action {index} out of range 0..{len(ACTIONS) - 1}")
    move, functional = divmod(int(index), len(FUNCTIONAL_ACTIONS))
    action = np.array(MINEDOJO_NOOP, dtype=np.int64)
    if move in (1, 2):  # forward / back
        action[0] = move
    elif move in (3, 4):  # strafe left / right
        action[1] = move - 2
    elif move in (5, 6, 7):  # jump / sneak / sprint
        action[2] = move - 4
    elif move in (8, 9):  # pitch: lower bin = negative degrees = look up
        action[3] = CAMERA_NOOP_BIN - CAMERA_STEP_BINS if move == 8 else CAMERA_NOOP_BIN + CAMERA_STEP_BINS
    elif move in (10, 11):  # yaw: lower bin = negative degrees = turn left
        action[4] = CAMERA_NOOP_BIN - CAMERA_STEP_BINS if move == 10 else CAMERA_NOOP_BIN + CAMERA_STEP_BINS
    if functional == 1:
        action[5] = FUNCTIONAL_USE
    elif functional == 2:
        action[5] = FUNCTIONAL_ATTACK
    return action


def split_action(name: str) -> tuple[str, str]:
    """(verb, item) of a functional action name ("craft:stick" -> ("craft", "stick"); "drop" -> ("drop", ""))."""
    verb, _sep, item = name.partition(":")
    return verb, item


def functional_actions(mc: Any) -> tuple[str, ...]:
    """The functional actions after the paper's 36, from MineDojo's data module ``mc``
    (``minedojo.sim.mc_meta.mc``): "drop"; ``craft:<item>`` for each backend item in ``mc.ALL_CRAFT_SMELT_ITEMS``
    (MineDojo's craft argument list: hand, table and smelting recipes); ``equip:<item>`` and ``destroy:<item>`` for
    every backend item; ``place:<item>`` for the backend items the data marks as blocks."""
    craftable = set(mc.ALL_CRAFT_SMELT_ITEMS)
    blocks = {str(r["type"]) for r in mc.all_data.get("items", []) if r.get("block") is True}
    return (DROP, *(f"{CRAFT}:{i}" for i in ITEMS if i in craftable), *(f"{EQUIP}:{i}" for i in ITEMS),
            *(f"{PLACE}:{i}" for i in ITEMS if i in blocks), *(f"{DESTROY}:{i}" for i in ITEMS))


def functional_action_to_minedojo(name: str, craft_items: Sequence[str], slot_names: Sequence[Any]) -> np.ndarray:
    """MineDojo's 8-dim action for a functional action name, as MineDojo's NNActionSpaceWrapper reads it.

    ``craft_items`` is ``mc.ALL_CRAFT_SMELT_ITEMS`` (craft argument = index of the item); ``slot_names`` are the
    36 inventory slot names of the last observation: equip/place/destroy name the first slot holding the item
    (as MineDojo's reverse_action picks it). When no slot holds it the no-op is returned: MineDojo's wrapper
    raises on an empty slot under its default strict check, and Malmo's equip/place commands do nothing for an
    item the player lacks, so a missing item is a no-op tick. A craft is always sent: without the ingredients
    (or the crafting table or furnace a recipe needs) Malmo crafts nothing.
    """
    verb, item = split_action(name)
    action = np.array(MINEDOJO_NOOP, dtype=np.int64)
    if verb == DROP and not item:
        action[5] = FUNCTIONAL_DROP
        return action
    if verb not in ITEM_VERBS or not item:
        raise InvalidArgument(f"unknown MineDojo action {name!r}")
    if verb == CRAFT:
        if item not in craft_items:
            raise InvalidArgument(f"{item!r} is not in MineDojo's craft list (mc.ALL_CRAFT_SMELT_ITEMS)")
        action[5], action[CRAFT_ARG] = FUNCTIONAL_CRAFT, list(craft_items).index(item)
        return action
    for slot, slot_name in enumerate(slot_names):
        if _norm(slot_name) == item:
            action[5], action[SLOT_ARG] = ITEM_VERBS[verb], slot
            return action
    return action


# --- items, achievements, vector --------------------------------------------------------------------
ITEMS = (
    "log", "planks", "stick", "crafting_table", "wooden_pickaxe", "wooden_axe", "wooden_sword",
    "cobblestone", "stone", "stone_pickaxe", "furnace", "coal", "iron_ore", "iron_ingot",
    "iron_pickaxe", "diamond", "torch", "bucket", "milk_bucket", "water_bucket", "shears", "wool",
    "string", "bed", "beef", "mutton", "porkchop", "sapling", "dirt", "sand", "apple", "wheat_seeds",
)
"""Inventory items reported in the vector and by inventory(): the paper's task chain plus food."""
_ITEM_ALIASES = {"log2": "log", "leaves2": "leaves"}
"""Minecraft 1.11 splits some blocks over two ids (acacia/dark oak logs are "log2"); count them as one."""

ACHIEVEMENT_ITEMS = {
    "collect_log": "log", "craft_planks": "planks", "craft_stick": "stick",
    "craft_crafting_table": "crafting_table", "craft_wooden_pickaxe": "wooden_pickaxe",
    "collect_cobblestone": "cobblestone", "craft_stone_pickaxe": "stone_pickaxe",
    "craft_furnace": "furnace", "collect_coal": "coal", "collect_iron_ore": "iron_ore",
    "smelt_iron_ingot": "iron_ingot", "craft_iron_pickaxe": "iron_pickaxe",
    "collect_diamond": "diamond", "craft_torch": "torch", "craft_bucket": "bucket",
    "collect_milk": "milk_bucket", "craft_shears": "shears", "collect_wool": "wool",
    "craft_bed": "bed",
}
"""Achievement -> item: unlocked (and latched for the episode) when a step raises that item's count.

Counts raised by give() or present at reset do not count, so start conditions unlock nothing.
"""
NEAR_ACHIEVEMENTS = {"near_crafting_table": "table", "near_furnace": "furnace"}
"""Achievement -> MineDojo "nearby_tools" key: latched when a step observes one within reach."""
ACHIEVEMENTS = (*ACHIEVEMENT_ITEMS, *NEAR_ACHIEVEMENTS)
THREATS = ("zombie", "skeleton", "creeper", "spider", "witch")
"""Minecraft's hostile mobs of the overworld surface, as MineDojo's lidar names entities (threat_distance)."""

VECTOR_LABELS = (
    "status/life", "status/food", "status/oxygen",
    "position/x", "position/y", "position/z",
    "facing/yaw", "facing/pitch",
    "compass/yaw_cos", "compass/yaw_sin", "compass/pitch_cos", "compass/pitch_sin",
    *(f"inventory/{item}" for item in ITEMS),
    "world/biome_id", "nearby/crafting_table", "nearby/furnace",
)

_UNSTACKABLE_SUFFIXES = ("_pickaxe", "_axe", "_sword", "_shovel", "_hoe", "_helmet", "_chestplate",
                         "_leggings", "_boots")
_UNSTACKABLE = frozenset({"shears", "milk_bucket", "water_bucket", "lava_bucket", "bed", "bow",
                          "fishing_rod", "flint_and_steel", "shield", "saddle", "boat"})
_STACK_16 = frozenset({"bucket", "snowball", "egg", "sign", "ender_pearl", "banner"})
_COMMON_GROUND = frozenset({"air", "grass_block", "dirt", "grass", "tallgrass", "stone", "sand", "gravel"})
_LAG_TICKS = 2  # MineDojo's own wrapper waits two no-op ticks after inventory-changing commands

MINEDOJO_SKILL_API = '''\
A skill is a Python generator function that takes `agent` and yields MineDojo action names, one per
game tick. It stops when it returns. No imports, no files, no dunder names; loops are budgeted.

    def skill(agent):
        # Walk up to the nearest cow in sight (no benchmark task: it only approaches, it takes nothing).
        while True:
            seen = agent.entities_in_sight.get("cow")
            if seen is not None and seen["distance"] <= 2:
                return                          # next to it
            if seen is None:
                yield "camera_right"            # turn until a cow is in sight
            elif abs(seen["yaw"]) > 15:
                yield "camera_right" if seen["yaw"] > 0 else "camera_left"
            else:
                yield "forward"

Movement actions (the paper's 36): a movement/camera part, optionally joined with "+use" or
"+attack": noop, forward, back, strafe_left, strafe_right, jump, sneak, sprint, camera_up,
camera_down, camera_left, camera_right; "use" and "attack" alone. Examples: "forward",
"forward+attack", "jump+use". camera_* turns the view by 30 degrees. "attack" is a left click (hit a
mob, mine the block looked at; blocks take several ticks, harder ones need a pickaxe). "use" is a
right click with the held item (a bucket on a cow gives milk_bucket, shears on a sheep give wool).
Functional actions (MineDojo's own; the full list of names is under Actions):
  "craft:<item>"   crafts one batch of <item> by Minecraft's recipe (e.g. "craft:planks" turns 1 log
                   into 4 planks). Hand recipes work anywhere; bigger ones need a crafting table in
                   view within about 5 blocks; smelted items (stone, coal, iron_ingot) need a furnace
                   nearby and fuel. Without the ingredients, table or furnace nothing happens (a no-op
                   tick, as in MineDojo); check agent.inventory afterwards.
  "equip:<item>"   puts the first stack of <item> in the main hand (agent.mainhand).
  "place:<item>"   places a block from the inventory against the block looked at (look down first:
                   "camera_down" twice to place on the ground ahead), e.g. "place:crafting_table".
  "destroy:<item>" deletes the first stack of <item> from the inventory.
  "drop"           drops the held item.
  equip/place/destroy of an item not in the inventory does nothing (a no-op tick). A functional action
  other than use/attack takes three game ticks (MineDojo waits two ticks for the inventory to update)
  and counts as one step.

Coordinates are Minecraft's: y is height; yaw 0 looks toward +z, 90 toward -x, -90 toward +x;
pitch -90 looks straight up, 90 straight down.
agent.position        -> [x, y, z] floats
agent.yaw, agent.pitch -> degrees
agent.life (0..20), agent.food (0..20), agent.oxygen (0..300)
agent.inventory       -> dict item -> count: log planks stick crafting_table wooden_pickaxe wooden_axe
                         wooden_sword cobblestone stone stone_pickaxe furnace coal iron_ore iron_ingot
                         iron_pickaxe diamond torch bucket milk_bucket water_bucket shears wool string
                         bed beef mutton porkchop sapling dirt sand apple wheat_seeds
agent.inventory_all   -> dict of every item held, any name
agent.mainhand        -> name of the held item ("air" when empty)
agent.voxels          -> 3x3x3 nested lists [x][y][z] of block names around the feet (offsets -1..1,
                         [1][1][1] is the block at the feet); None when the task has no voxels.
                         Block names: air grass_block dirt stone wood (a tree trunk) leaves water
                         lava sand ...; note the block "wood" drops the item "log".
agent.blocks_in_sight   -> dict block name -> distance of the nearest one hit by a view ray
agent.entities_in_sight -> dict entity (cow, sheep, pig, zombie, ...) -> {"distance": metres,
                           "yaw": degrees from the view direction, positive = to the right}
                           (both empty on tasks without view rays)
agent.nearby_crafting_table, agent.nearby_furnace -> True when one is within reach
agent.biome_id        -> Minecraft biome id
agent.steps           -> ticks this skill has run so far
'''


@dataclasses.dataclass(frozen=True)
class MineDojoSettings(Settings):
    """Settings of the MineDojo backend (``RLGPT_MINEDOJO_*``)."""

    env_prefix: ClassVar[str] = "RLGPT_MINEDOJO"

    task_id: str = setting("open-ended", "MineDojo task: 'open-ended' (rewards come from RL-GPT's own "
                           "task logic) or a programmatic id such as harvest_milk_with_empty_bucket_and_cow.")
    image_height: int = setting(160, "RGB frame height (MineCLIP/Plan4MC use 160x256).", ge=16, le=1024)
    image_width: int = setting(256, "RGB frame width.", ge=16, le=1024)
    fast_reset: bool = setting(False, "Reset with /kill + teleport instead of a new mission: much faster, "
                               "but world edits (chopped trees) persist, so resets are not reproducible.")
    world_seed: int = setting(0, "Base Minecraft world seed.", ge=0)
    world_count: int = setting(1, "Episodes with seed s play world world_seed + s % world_count. An env "
                               "relaunches Minecraft (tens of seconds) whenever its world changes; the "
                               "env server seeds env i of n with seed + i + k*n, so world_count = n gives "
                               "every env its own world and no relaunch.", ge=1)
    episode_length: int = setting(1000, "Default episode length in ticks.", ge=1)
    lidar: bool = setting(True, "Add view rays (entities/blocks in sight) on tasks whose spec does not "
                          "fix use_lidar (open-ended and meta tasks).")

    def extra_problems(self) -> list[str]:
        return [] if self.task_id.strip() else ["task_id: must not be empty"]


_META_TASKS = frozenset({"open-ended", "harvest", "combat", "techtree", "survival"})
_LIDAR_RAYS = [(math.radians(p), math.radians(y), 32.0) for p in (-30, -15, 0, 15, 30)
               for y in range(-60, 61, 15)]


def _raw_name(name: Any) -> str:
    """MineDojo names use spaces ("crafting table", "grass block"); Minecraft ids use underscores."""
    text = str(name).strip().lower().replace(" ", "_")
    return text[len("minecraft:"):] if text.startswith("minecraft:") else text


def _norm(name: Any) -> str:
    """The name we report: underscores, and split ids such as log2 folded into one item."""
    text = _raw_name(name)
    return _ITEM_ALIASES.get(text, text)


def _scalar(value: Any, default: float = 0.0) -> float:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    return float(arr[0]) if arr.size else default


def _max_stack(item: str) -> int:
    if item in _UNSTACKABLE or item.endswith(_UNSTACKABLE_SUFFIXES):
        return 1
    return 16 if item in _STACK_16 else 64


def _entity_hits(rays: dict[str, Any]) -> list[tuple[str, float, float, float]]:
    """(name, distance, ray yaw, ray pitch) of every lidar ray that hit an entity (yaw and pitch in radians, the
    ray's own, relative to the player's view)."""
    names = np.asarray(rays.get("entity_name", [])).reshape(-1)
    dists = np.asarray(rays.get("entity_distance", np.zeros(len(names))), dtype=np.float64).reshape(-1)
    yaws = np.asarray(rays.get("ray_yaw", np.zeros(len(names))), dtype=np.float64).reshape(-1)
    pitches = np.asarray(rays.get("ray_pitch", np.zeros(len(names))), dtype=np.float64).reshape(-1)
    hits = []
    for name, dist, yaw, pitch in zip(names, dists, yaws, pitches, strict=False):
        name = _norm(name)
        if name not in ("null", "") and dist >= 0:
            hits.append((name, float(dist), float(yaw), float(pitch)))
    return hits


class MineDojoEnv(BackendEnv):
    """One MineDojo task env, created at the first reset and re-created only when its world changes.

    Why: ``minedojo.make`` bakes seed and world_seed into the mission, and each make launches a
    Minecraft JVM (tens of seconds), while the env server gives every episode a new seed. So the world
    is ``world_seed + seed % world_count`` (settings) and only a change of world re-makes the env;
    other resets call ``env.seed(seed)`` and ``env.reset()``. With the default ``fast_reset=False``
    every reset starts a new mission (open-ended tasks also regenerate the world), so a seed always
    starts in the same world at the same spawn; ``fast_reset=True`` trades that for speed (world
    edits persist and MineDojo teleports the player randomly).
    """

    def __init__(self, minedojo: Any, inventory_item: type, known_items: frozenset[str],
                 settings: MineDojoSettings, actions: tuple[str, ...] = ACTIONS,
                 craft_items: Sequence[str] = ()) -> None:
        self._minedojo = minedojo
        self._actions = actions
        self._craft_items = tuple(craft_items)
        self._inventory_item = inventory_item
        self._known_items = known_items
        self._settings = settings
        self._env: Any = None
        self._world_seed: int | None = None
        self._obs: dict[str, Any] | None = None
        self._info: dict[str, Any] = {}
        self._counts: dict[str, int] = {}
        self._unlocked: set[str] = set()
        self._dead = False
        self._last_damage: dict[str, Any] = {}

    # --- lifecycle ----------------------------------------------------------------------------------
    def _make_kwargs(self, seed: int, world_seed: int) -> dict[str, Any]:
        s = self._settings
        kwargs: dict[str, Any] = {
            "image_size": (s.image_height, s.image_width),
            "seed": int(seed),
            "world_seed": str(world_seed),  # a string: MineDojo turns a falsy 0 into a random world
            "fast_reset": s.fast_reset,
        }
        task = s.task_id.lower()
        if task in _META_TASKS or task.startswith("creative:"):
            # Programmatic task specs fix these themselves; repeating them is a TypeError there.
            kwargs["use_voxel"] = True
            kwargs["voxel_size"] = {"xmin": -1, "ymin": -1, "zmin": -1, "xmax": 1, "ymax": 1, "zmax": 1}
            if s.lidar:
                kwargs["use_lidar"] = True
                kwargs["lidar_rays"] = list(_LIDAR_RAYS)
        if task == "open-ended" and not s.fast_reset:
            kwargs["regenerate_world_after_reset"] = True  # only MineDojoSim takes it, not meta tasks
        return kwargs

    def _remake(self, seed: int, world_seed: int) -> None:
        if self._env is not None:
            self.close()
        kwargs = self._make_kwargs(seed, world_seed)
        log.info("starting MineDojo task %r (world seed %s); this launches Minecraft",
                 self._settings.task_id, world_seed)
        self._env = self._minedojo.make(task_id=self._settings.task_id, **kwargs)
        self._world_seed = world_seed

    def reset(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        world_seed = self._settings.world_seed + int(seed) % self._settings.world_count
        if self._env is None or world_seed != self._world_seed:
            self._remake(int(seed), world_seed)
        else:
            self._env.seed(int(seed))  # reseeds MineDojo's own RNG (mission seeds)
        obs = self._env.reset()
        self._obs, self._info = obs, {}
        self._counts = self._count_items(obs)
        self._unlocked = set()
        self._dead = False
        self._last_damage = {}
        return self._image(), self._vector()

    def step(self, action: int) -> RawStep:
        env = self._require_env()
        obs, reward, done, info = env.step(self.minedojo_action(action))
        self._absorb(obs, info if isinstance(info, dict) else {}, unlock=True)
        return RawStep(image=self._image(), vector=self._vector(), native_reward=float(reward),
                       dead=self._dead, backend_done=bool(done) and not self._dead)

    def minedojo_action(self, action: int) -> np.ndarray:
        """The 8-dim MineDojo action for one of the backend's action ids (functional ones read the inventory)."""
        index = int(action)
        if 0 <= index < len(ACTIONS):
            return paper_action_to_minedojo(index)
        if not 0 <= index < len(self._actions):
            raise InvalidArgument(f"action {action} out of range 0..{len(self._actions) - 1}")
        names = np.asarray(self._require_obs().get("inventory", {}).get("name", [])).reshape(-1)
        return functional_action_to_minedojo(self._actions[index], self._craft_items, list(names))

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        self._require_obs()
        return self._image(), self._vector()

    def close(self) -> None:
        if self._env is None:
            return
        try:
            self._env.close()
        except (OSError, RuntimeError) as exc:  # a crashed JVM must not stop the session from closing
            log.warning("closing MineDojo env failed: %s", exc)
        self._env, self._obs, self._world_seed = None, None, None

    def _require_env(self) -> Any:
        if self._env is None or self._obs is None:
            raise FailedPrecondition("MineDojo env used before reset()")
        return self._env

    def _require_obs(self) -> dict[str, Any]:
        self._require_env()
        assert self._obs is not None
        return self._obs

    # --- observation bookkeeping --------------------------------------------------------------------
    def _absorb(self, obs: dict[str, Any], info: dict[str, Any], unlock: bool) -> None:
        self._obs, self._info = obs, info
        counts = self._count_items(obs)
        if unlock:
            for achievement, item in ACHIEVEMENT_ITEMS.items():
                if counts.get(item, 0) > self._counts.get(item, 0):
                    self._unlocked.add(achievement)
            tools = obs.get("nearby_tools", {})
            for achievement, key in NEAR_ACHIEVEMENTS.items():
                if key in tools and bool(np.asarray(tools[key]).reshape(-1)[0]):
                    self._unlocked.add(achievement)
        self._counts = counts
        damage = obs.get("damage_source", {})
        if any(self._flag(damage, k) for k in ("is_fire_damage", "is_explosion", "is_projectile",
                                               "is_magic_damage")) or _scalar(damage.get("damage_distance", 0)) > 0:
            self._last_damage = {k: _scalar(v) for k, v in damage.items()}  # Malmo reports each hit once
        if not self._dead:
            self._dead = (self._life() <= 0 or bool(info.get("is_dead", False))
                          or bool(info.get("living_death_event_fired", False)))

    @staticmethod
    def _flag(values: dict[str, Any], key: str) -> bool:
        return key in values and bool(_scalar(values[key]))

    def _slots(self, obs: dict[str, Any] | None = None) -> list[tuple[int, str, int, int]]:
        """(slot, Minecraft item id, quantity, variant) of the 36 inventory slots (no aliasing)."""
        inv = (obs if obs is not None else self._require_obs()).get("inventory", {})
        names = list(np.asarray(inv.get("name", [])).reshape(-1))
        quantities = np.asarray(inv.get("quantity", np.zeros(len(names))), dtype=np.float64).reshape(-1)
        variants = np.asarray(inv.get("variant", np.zeros(len(names))), dtype=np.int64).reshape(-1)
        return [(i, _raw_name(names[i]), int(quantities[i]), int(variants[i])) for i in range(len(names))]

    def _count_items(self, obs: dict[str, Any]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _slot, name, quantity, _variant in self._slots(obs):
            if name != "air" and quantity > 0:
                item = _norm(name)
                counts[item] = counts.get(item, 0) + quantity
        return counts

    def _image(self) -> np.ndarray:
        rgb = np.asarray(self._require_obs()["rgb"], dtype=np.uint8)
        return np.ascontiguousarray(rgb.transpose(1, 2, 0))  # MineDojo frames are CHW

    def _life(self) -> float:
        return _scalar(self._require_obs().get("life_stats", {}).get("life", 20.0), 20.0)

    def _location(self) -> tuple[list[float], float, float]:
        loc = self._require_obs().get("location_stats", {})
        pos = np.asarray(loc.get("pos", (0.0, 0.0, 0.0)), dtype=np.float64).reshape(-1)
        return [float(v) for v in pos[:3]], _scalar(loc.get("yaw", 0.0)), _scalar(loc.get("pitch", 0.0))

    def _vector(self) -> np.ndarray:
        obs = self._require_obs()
        life_stats = obs.get("life_stats", {})
        pos, yaw, pitch = self._location()
        tools = obs.get("nearby_tools", {})
        values = [
            self._life(), _scalar(life_stats.get("food", 20.0), 20.0), _scalar(life_stats.get("oxygen", 300.0), 300.0),
            *pos, yaw, pitch,
            math.cos(math.radians(yaw)), math.sin(math.radians(yaw)),
            math.cos(math.radians(pitch)), math.sin(math.radians(pitch)),
            *(self._counts.get(item, 0) for item in ITEMS),
            _scalar(obs.get("location_stats", {}).get("biome_id", 0)),
            _scalar(tools.get("table", 0)), _scalar(tools.get("furnace", 0)),
        ]
        return np.asarray(values, dtype=np.float32)

    # --- BackendEnv queries -------------------------------------------------------------------------
    def inventory(self) -> dict[str, int]:
        self._require_obs()
        return {item: int(self._counts.get(item, 0)) for item in ITEMS}

    def give(self, item: str, count: int) -> None:
        env = self._require_env()
        item = _raw_name(item)
        if item not in self._known_items:
            raise InvalidArgument(f"unknown Minecraft item {item!r}")
        if count <= 0:
            return
        remaining, stack = int(count), _max_stack(item)
        commands = []
        slots = self._slots()
        # Top up stacks of the same item first, then fill empty slots: /replaceitem sets a whole slot.
        for slot, name, quantity, variant in slots:
            if remaining and name == item and quantity < stack:
                added = min(remaining, stack - quantity)
                commands.append(self._inventory_item(slot=slot, name=item, variant=variant,
                                                     quantity=quantity + added))
                remaining -= added
        for slot, name, _quantity, _variant in slots:
            if remaining and name == "air":
                added = min(remaining, stack)
                commands.append(self._inventory_item(slot=slot, name=item, variant=None, quantity=added))
                remaining -= added
        if remaining:
            raise FailedPrecondition(f"inventory full: cannot give {count} {item}")
        counted = _norm(item)  # how the item shows in counts (log2 counts as log)
        expected = self._counts.get(counted, 0) + int(count)
        sim = env.unwrapped  # the MineDojoSim under the task wrappers, as Plan4MC uses it
        obs, _reward, _done, info = sim.set_inventory(inventory_list=commands)
        for tick in range(_LAG_TICKS):
            if tick and self._count_items(obs).get(counted, 0) >= expected:
                break
            # Through the wrappers, at least once: MineDojo's action wrapper resolves equip/place/destroy slots
            # from the inventory names of the last observation *it* returned, which the sim's command skipped.
            obs, _reward, _done, info = env.step(np.array(MINEDOJO_NOOP, dtype=np.int64))
        self._absorb(obs, info if isinstance(info, dict) else {}, unlock=False)
        if self._counts.get(counted, 0) < expected:
            log.warning("gave %d %s but the inventory shows %d", count, item, self._counts.get(counted, 0))

    def achievements(self) -> set[str]:
        return set(self._unlocked)

    def health(self) -> float:
        return self._life()

    def _voxel_names(self) -> list[list[list[str]]] | None:
        voxels = self._require_obs().get("voxels")
        if not voxels or "block_name" not in voxels:
            return None
        names = np.asarray(voxels["block_name"])
        return [[[_norm(n) for n in row] for row in plane] for plane in names.tolist()]

    def _in_sight(self) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        rays = self._require_obs().get("rays")
        blocks: dict[str, float] = {}
        entities: dict[str, dict[str, float]] = {}
        if not rays:
            return blocks, entities
        block_names = np.asarray(rays.get("block_name", [])).reshape(-1)
        block_dist = np.asarray(rays.get("block_distance", np.zeros(len(block_names))), dtype=np.float64).reshape(-1)
        for name, dist in zip(block_names, block_dist, strict=False):
            name = _norm(name)
            if name != "air" and dist >= 0 and dist < blocks.get(name, math.inf):
                blocks[name] = round(float(dist), 2)
        for name, dist, yaw, _pitch in _entity_hits(rays):
            if name not in entities or dist < entities[name]["distance"]:
                # Plan4MC: MineDojo's lidar yaw has the opposite sign of the player's yaw.
                entities[name] = {"distance": round(float(dist), 2), "yaw": round(-math.degrees(float(yaw)), 1)}
        return blocks, entities

    def threat_distance(self, within: int) -> int | None:
        """The larger axis distance (blocks along x, y or z, rounded up) to the nearest hostile mob a lidar ray
        hit: a ray's hit lies ``distance`` along the ray's own pitch and its yaw turned by the player's."""
        rays = self._require_obs().get("rays")
        if not rays:
            return None
        player_yaw = math.radians(self._location()[1])
        near = []
        for name, dist, yaw, pitch in _entity_hits(rays):
            if name not in THREATS:
                continue
            world_yaw = player_yaw - float(yaw)  # the lidar's yaw has the opposite sign (Plan4MC)
            flat, up = dist * math.cos(pitch), dist * math.sin(pitch)
            cells = math.ceil(round(max(abs(flat * math.sin(world_yaw)), abs(flat * math.cos(world_yaw)),
                                        abs(up)), 2))
            if cells <= within:
                near.append(cells)
        return min(near) if near else None

    def perception(self) -> dict[str, Any]:
        obs = self._require_obs()
        life_stats = obs.get("life_stats", {})
        pos, yaw, pitch = self._location()
        tools = obs.get("nearby_tools", {})
        equipment = np.asarray(obs.get("equipment", {}).get("name", ["air"])).reshape(-1)
        blocks, entities = self._in_sight()
        return {
            "position": pos,
            "yaw": yaw,
            "pitch": pitch,
            "life": self._life(),
            "food": _scalar(life_stats.get("food", 20.0), 20.0),
            "oxygen": _scalar(life_stats.get("oxygen", 300.0), 300.0),
            "biome_id": int(_scalar(obs.get("location_stats", {}).get("biome_id", 0))),
            "inventory": self.inventory(),
            "inventory_all": dict(sorted(self._counts.items())),
            "mainhand": _norm(equipment[0]) if equipment.size else "air",
            "voxels": self._voxel_names(),
            "blocks_in_sight": blocks,
            "entities_in_sight": entities,
            "nearby_crafting_table": bool(_scalar(tools.get("table", 0))),
            "nearby_furnace": bool(_scalar(tools.get("furnace", 0))),
        }

    def nearby_text(self) -> str:
        names: set[str] = set()
        voxels = self._voxel_names()
        if voxels:
            names |= {n for plane in voxels for row in plane for n in row} - _COMMON_GROUND
        tools = self._require_obs().get("nearby_tools", {})
        if _scalar(tools.get("table", 0)):
            names.add("crafting_table")
        if _scalar(tools.get("furnace", 0)):
            names.add("furnace")
        _blocks, entities = self._in_sight()
        parts = sorted(names) + [f"{name} ({info['distance']:.0f}m)" for name, info in sorted(entities.items())]
        return ", ".join(parts) if parts else "nothing notable"

    def death_cause(self) -> str:
        if not self._dead:
            return ""
        obs = self._require_obs()
        life_stats = obs.get("life_stats", {})
        voxels = self._voxel_names() or []
        around = {n for plane in voxels for row in plane for n in row}
        damage = self._last_damage
        if "lava" in around:
            return "lava"
        if damage.get("is_fire_damage"):
            return "fire"
        if _scalar(life_stats.get("oxygen", 300.0), 300.0) <= 0:
            return "drowned"
        if _scalar(life_stats.get("food", 20.0), 20.0) <= 0:
            return "starvation"
        if damage.get("is_explosion"):
            return "explosion"
        if damage.get("is_projectile"):
            return "shot by a projectile"
        if damage.get("damage_distance", 0) > 0:
            return "attacked by a mob"
        pos, _yaw, _pitch = self._location()
        if pos[1] < 0:
            return "fell out of the world"
        return "unknown"


class MineDojoBackend(Backend):
    """Factory of MineDojo envs; importing ``minedojo`` happens here so its absence is reportable."""

    def __init__(self, settings: MineDojoSettings | None = None) -> None:
        import minedojo  # ImportError -> base.get_backend reports FAILED_PRECONDITION
        from minedojo.sim import ALL_ITEMS, InventoryItem
        from minedojo.sim.mc_meta import mc

        self._minedojo = minedojo
        self._craft_items = tuple(str(i) for i in mc.ALL_CRAFT_SMELT_ITEMS)
        self._inventory_item = InventoryItem
        self._known_items = frozenset(str(i) for i in ALL_ITEMS) | frozenset(ITEMS)
        self.settings = settings or MineDojoSettings.load()
        self.spec = BackendSpec(
            name="minedojo",
            actions=(*ACTIONS, *functional_actions(mc)),
            achievements=ACHIEVEMENTS,
            items=ITEMS,
            image_shape=(self.settings.image_height, self.settings.image_width, 3),
            vector_labels=VECTOR_LABELS,
            default_episode_length=self.settings.episode_length,
            skill_api=MINEDOJO_SKILL_API,
            noop_action=ACTIONS.index("noop"),
            rules=installed_minedojo_rules,
            threats=THREATS,
            display_name="Minecraft (MineDojo)",
            move_actions=MOVES,
            interact_action="attack",  # mines the faced block and hits a mob (MineDojo's functional 3)
            stack_limit=stack_limit(mc),
            vector_scale=VECTOR_SCALE,
        )

    def make_env(self) -> BackendEnv:
        return MineDojoEnv(self._minedojo, self._inventory_item, self._known_items, self.settings,
                           actions=self.spec.actions, craft_items=self._craft_items)
