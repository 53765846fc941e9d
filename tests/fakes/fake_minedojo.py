"""Stand-in of the minedojo package for machines where Minecraft cannot run (a test double).

This is NOT MineDojo and simulates no real Minecraft: it reproduces the parts of MineDojo's Python
API that ``services/env_server/backends/minedojo.py`` touches, with the signatures and observation
layout read from MineDojo's source (github.com/MineDojo/MineDojo), over a toy world just rich
enough to test the backend's logic:

- ``make(task_id, *args, cam_interval=15, **kwargs)`` (minedojo/tasks/__init__.py) returning an
  ARNNWrapper-like env: MultiDiscrete([3, 3, 4, 25, 25, 8, 244, 36]) actions converted to the sim's
  dict action as NNActionSpaceWrapper.action does (camera degrees = bin * cam_interval - 180).
  Programmatic task specs are merged with kwargs as ``f(**spec, **kwargs)``, so a repeated key is a
  TypeError as in the real ``_specific_task_make``; "open-ended" pops ``fast_reset`` and passes the
  rest to the sim, whose keyword-only signature (like MineDojoSim's) rejects unknown arguments.
- ``env.reset() -> obs``; ``env.step(action) -> (obs, reward, done, info)``; ``env.unwrapped`` is
  the sim with ``set_inventory(inventory_list, action=None)`` / ``execute_cmd(cmd, action=None)``
  implemented through ``/replaceitem`` commands like MineDojo's CMDExecutor (which refuses /give).
- Observation dict keys, shapes and dtypes as MineDojo's handlers build them: "rgb" (3, H, W) uint8,
  "inventory"/"equipment" slot arrays with space-separated names, "life_stats", "location_stats",
  "nearby_tools", "damage_source", "voxels" (use_voxel) and "rays" (use_lidar). "full_stats",
  "masks" and "delta_inv" are omitted (the backend does not read them).
- ``minedojo.sim.mc_meta.mc`` (``mc``): ``all_data``, ``CRAFTING_RECIPES_BY_OUTPUT``,
  ``SMELTING_RECIPES_BY_OUTPUT`` built as MineDojo's mc.py builds them, over a subset of the real
  mc_constants.json copied unchanged (see ``_MC_CRAFTING_RECIPES``).

- The 8-dim action's functional part as NNActionSpaceWrapper reads it (drop, craft over
  ``mc.ALL_CRAFT_SMELT_ITEMS``, equip/place/destroy over the slot names of its last observation, a
  ValueError for an empty slot, two no-op ticks after each) and the sim's dict keys craft /
  craft_with_table / smelt / equip / place / drop as Malmo's command handlers apply them (sources named
  at ``FakeSim._functional``; nearness, placing and fuel simplified there).

Toy-world behaviour (trees every few cells, attack thrice to get a log, milking a cow with a bucket,
a one-tick lag before command inventory changes show) is invented for tests, not measured.
Test hooks (``hurt``, ``set_block``, ``spawn``, ``end_episode``) exist only here.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import types
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

log = logging.getLogger(__name__)

MAKE_CALLS: list[dict[str, Any]] = []
"""Every make() call's arguments, for tests (cleared by the test fixture)."""

ACTION_NVEC = (3, 3, 4, 25, 25, 8, 244, 36)
N_INV_SLOTS = 36
EQUIP_SLOTS = {"mainhand": 0, "offhand": 40, "head": 39, "chest": 38, "legs": 37, "feet": 36}
VALID_CMDS = {"summon", "kill", "time", "weather", "replaceitem", "tp", "clear", "setblock", "spreadplayers"}
ALL_ITEMS = sorted({
    "air", "apple", "bed", "beef", "bucket", "coal", "cobblestone", "crafting_table", "diamond", "dirt",
    "furnace", "iron_ingot", "iron_ore", "iron_pickaxe", "leaves", "log", "log2", "milk_bucket",
    "mutton", "planks", "porkchop", "sand", "sapling", "shears", "stick", "stone", "stone_pickaxe",
    "string", "torch", "water_bucket", "wheat_seeds", "wooden_axe", "wooden_pickaxe", "wooden_sword",
    "wool", "diamond_axe",
})
"""A subset of MineDojo's ALL_ITEMS (the real list, from mc_constants.json, has several hundred)."""

_VOXEL_3 = {"xmin": -1, "ymin": -1, "zmin": -1, "xmax": 1, "ymax": 1, "zmax": 1}
_PROGRAMMATIC_TASKS: dict[str, dict[str, Any]] = {}  # filled below, once InventoryItem exists


class InventoryItem(NamedTuple):
    """Same fields as minedojo.sim.inventory.InventoryItem."""

    slot: int | str
    name: str
    variant: int | None = None
    quantity: int | None = None


def _cmd_slot(slot: int) -> str:
    """minedojo.sim.inventory.map_slot_number_to_cmd_slot."""
    names = {v: k for k, v in EQUIP_SLOTS.items()}
    if slot in (0, 40):
        return f"slot.weapon.{names[slot]}"
    if 36 <= slot <= 39:
        return f"slot.armor.{names[slot]}"
    if 1 <= slot <= 8:
        return f"slot.hotbar.{slot}"
    return f"slot.inventory.{slot - 9}"


def _slot_from_cmd(text: str) -> int:
    reverse = {_cmd_slot(i): i for i in range(41)}
    return reverse[text]


def _display(item_id: str) -> str:
    """TrueFlatInventoryObservation._name_preprocess: underscores become spaces."""
    return item_id.replace("_", " ")


class _DictActionSpace:
    """The sim's dict action space (only no_op is needed)."""

    @staticmethod
    def no_op() -> dict[str, Any]:
        action: dict[str, Any] = {k: 0 for k in ("forward", "back", "left", "right", "jump", "sneak",
                                                 "sprint", "use", "attack", "drop")}
        action["camera"] = np.zeros(2, dtype=np.float32)
        for key in ("craft", "craft_with_table", "smelt", "equip", "place"):
            action[key] = "none"
        return action


class _MultiDiscrete:
    def __init__(self, nvec: tuple[int, ...], noop: tuple[int, ...]) -> None:
        self.nvec = np.asarray(nvec, dtype=np.int64)
        self._noop = np.asarray(noop, dtype=np.int64)

    def contains(self, x: Any) -> bool:
        x = np.asarray(x)
        return x.shape == self.nvec.shape and x.dtype != object and bool(np.all(x >= 0) and np.all(x < self.nvec))

    def no_op(self) -> np.ndarray:
        return self._noop.copy()


class FakeSim:
    """Stands in for MineDojoSim: keyword-only arguments named as MineDojoSim's."""

    def __init__(self, *, image_size: int | tuple[int, int], initial_inventory: list[InventoryItem] | None = None,
                 start_position: dict[str, float] | None = None, start_health: float | None = None,
                 start_food: int | None = None, start_time: int | None = None, initial_weather: str | None = None,
                 allow_mob_spawn: bool = True, generate_world_type: str = "default",
                 regenerate_world_after_reset: bool = False, world_seed: str | int | None = None,
                 specified_biome: int | str | None = None, use_voxel: bool = False,
                 voxel_size: dict[str, int] | None = None, use_lidar: bool = False,
                 lidar_rays: list[tuple[float, float, float]] | None = None, event_level_control: bool = True,
                 seed: int | None = None, sim_name: str = "MineDojoSim", break_speed_multiplier: float = 1.0,
                 allow_time_passage: bool = True) -> None:
        if isinstance(image_size, int):
            image_size = (image_size, image_size)
        self.image_size = tuple(image_size)
        self.use_voxel = use_voxel
        self.voxel_size = voxel_size or _VOXEL_3
        self.use_lidar = use_lidar
        self.lidar_rays = lidar_rays or [(0.0, 0.0, 10.0)]
        self.initial_inventory = initial_inventory
        self.regenerate = regenerate_world_after_reset
        world_seed = world_seed or ""  # MineDojo: a falsy seed means a random world
        self.world_hash = zlib.crc32(str(world_seed).encode()) if world_seed != "" else int(
            np.random.default_rng().integers(2**31))
        self.specified_biome = specified_biome
        self._rng = np.random.default_rng(seed)
        self.action_space = _DictActionSpace()
        self.commands: list[str] = []
        self.closed = False
        self.dict_actions: list[dict[str, Any]] = []  # test hook: every dict action stepped
        self.edits: dict[tuple[int, int, int], str] = {}
        self.entities: list[dict[str, Any]] = []
        self._pending: list[str] = []
        self._prev_obs: dict[str, Any] | None = None
        self._prev_info: dict[str, Any] = {}
        self._start_agent()

    # --- world --------------------------------------------------------------------------------------
    def _start_agent(self) -> None:
        h = self.world_hash
        self.pos = np.array([(h % 100) - 50 + 0.5, 64.0, ((h // 100) % 100) - 50 + 0.5])
        self.yaw, self.pitch = 0.0, 0.0
        self.life, self.food, self.oxygen = 20.0, 20.0, 300.0
        self.inventory: list[list[Any]] = [["air", 0, 0] for _ in range(N_INV_SLOTS)]
        for item in self.initial_inventory or []:
            slot = EQUIP_SLOTS[item.slot] if isinstance(item.slot, str) else int(item.slot)
            self.inventory[slot] = [item.name, item.quantity or 1, item.variant or 0]
        self.break_progress = 0
        self.damage: dict[str, Any] = {}
        self.dead_event = False
        self.terminated = False

    def block(self, x: int, y: int, z: int) -> str:
        """Display name of the block at a cell (toy terrain: grass floor, trees on some cells)."""
        if (x, y, z) in self.edits:
            return self.edits[(x, y, z)]
        if y < 63:
            return "dirt"
        if y == 63:
            return "grass block"
        spawn = (math.floor(self.pos_spawn()[0]), math.floor(self.pos_spawn()[2]))
        tree = zlib.crc32(f"{self.world_hash}:{x}:{z}".encode()) % 5 == 0 and (x, z) != spawn
        if tree and y in (64, 65, 66):
            return "wood"
        if tree and y == 67:
            return "leaves"
        return "air"

    def pos_spawn(self) -> tuple[float, float, float]:
        h = self.world_hash
        return ((h % 100) - 50 + 0.5, 64.0, ((h // 100) % 100) - 50 + 0.5)

    def _direction(self, yaw: float | None = None) -> tuple[float, float]:
        yaw = math.radians(self.yaw if yaw is None else yaw)
        return -math.sin(yaw), math.cos(yaw)  # Minecraft: yaw 0 faces +z, 90 faces -x

    def _facing_cell(self) -> tuple[int, int, int]:
        dx, dz = self._direction()
        y = 64 if self.pitch > 30 else 65
        return math.floor(self.pos[0] + dx), y, math.floor(self.pos[2] + dz)

    def _move(self, forward: float, strafe: float) -> None:
        fx, fz = self._direction()
        rx, rz = self._direction(self.yaw + 90)  # "right" is +90 yaw
        nx, nz = self.pos[0] + 0.25 * (forward * fx + strafe * rx), self.pos[2] + 0.25 * (forward * fz + strafe * rz)
        if self.block(math.floor(nx), 64, math.floor(nz)) in ("air", "lava", "water"):
            self.pos[0], self.pos[2] = nx, nz

    def _give_slot(self, item: str, count: int) -> None:
        for slot in self.inventory:
            if slot[0] == item and slot[1] < 64:
                slot[1] += count
                return
        for slot in self.inventory:
            if slot[0] == "air":
                slot[:] = [item, count, 0]
                return

    def _entity_ahead(self, name: str, reach: float) -> dict[str, Any] | None:
        for entity in self.entities:
            dx, dz = entity["x"] - self.pos[0], entity["z"] - self.pos[2]
            distance = math.hypot(dx, dz)
            bearing = math.degrees(math.atan2(-dx, dz)) - self.yaw
            bearing = (bearing + 180) % 360 - 180
            if entity["name"] == name and distance <= reach and abs(bearing) <= 30:
                return entity
        return None

    # --- test hooks ---------------------------------------------------------------------------------
    def hurt(self, amount: float, **flags: Any) -> None:
        """Damages the player at the next tick; flags such as is_fire_damage=True go to damage_source."""
        self._pending_damage = (amount, flags)

    def set_block(self, name: str, dx: int, dy: int, dz: int) -> None:
        base = np.floor(self.pos).astype(int)
        self.edits[(int(base[0] + dx), int(base[1] + dy), int(base[2] + dz))] = name

    def spawn(self, name: str, distance: float, bearing: float = 0.0) -> None:
        dx, dz = self._direction(self.yaw + bearing)
        self.entities.append({"name": name, "x": self.pos[0] + distance * dx, "z": self.pos[2] + distance * dz})

    def end_episode(self) -> None:
        self.terminated = True

    # --- MineDojoSim API ----------------------------------------------------------------------------
    @property
    def prev_obs(self) -> dict[str, Any] | None:
        return self._prev_obs

    @property
    def prev_info(self) -> dict[str, Any]:
        return self._prev_info

    @property
    def is_terminated(self) -> bool:
        return self.terminated

    def seed(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)

    def reset(self) -> dict[str, Any]:
        if self.regenerate:
            self.edits.clear()
        self.entities.clear()
        self._pending.clear()
        self._start_agent()
        return self._observe()[0]

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        self._apply_pending()  # commands from the previous tick show now (a simulated one-tick lag)
        if "chat" in action:
            self._pending.append(action["chat"])
        dpitch, dyaw = (float(v) for v in action["camera"])
        self.pitch = float(np.clip(self.pitch + dpitch, -90, 90))
        self.yaw = (self.yaw + dyaw + 180) % 360 - 180
        self._move(action["forward"] - action["back"], action["right"] - action["left"])
        if action["attack"]:
            cell = self._facing_cell()
            if self.block(*cell) == "wood":
                self.break_progress += 1
                if self.break_progress >= 3:
                    self.edits[cell] = "air"
                    self.break_progress = 0
                    self._give_slot("log", 1)
        if action["use"]:
            held = self.inventory[0][0]
            if held == "bucket" and self._entity_ahead("cow", 3.0):
                self.inventory[0] = ["milk_bucket", 1, 0]
            elif held == "shears" and self._entity_ahead("sheep", 3.0):
                self._give_slot("wool", 1)
        self.dict_actions.append(action)
        self._functional(action)
        feet = self.block(*np.floor(self.pos).astype(int))
        if feet == "lava":
            self.life -= 4.0
            self.damage = {"is_fire_damage": True}
        pending = getattr(self, "_pending_damage", None)
        if pending is not None:
            amount, flags = pending
            self.life -= amount
            self.damage = dict(flags)
            self._pending_damage = None
        if self.life <= 0:
            self.life = 0.0
            self.dead_event = True
            self.terminated = True
        obs, info = self._observe()
        return obs, 0.0, self.terminated, info

    # --- functional actions (Malmo's command handlers; each applied at once, the wrapper's lag ticks follow) ---
    def _count(self, item: str) -> int:
        return sum(slot[1] for slot in self.inventory if slot[0] == item)

    def _take(self, item: str, count: int) -> None:
        for slot in self.inventory:
            taken = min(count, slot[1]) if slot[0] == item else 0
            slot[1] -= taken
            count -= taken
            if slot[0] == item and slot[1] == 0:
                slot[:] = ["air", 0, 0]

    def _near(self, display_name: str) -> bool:
        base = np.floor(self.pos).astype(int)
        return any(self.block(base[0] + dx, base[1] + dy, base[2] + dz) == display_name
                   for dx in range(-3, 4) for dy in range(-1, 2) for dz in range(-3, 4))

    def _craft(self, item: str) -> None:
        """CraftingHelper.attemptCrafting: the first recipe whose ingredients the player has; else nothing."""
        for recipe in mc.CRAFTING_RECIPES_BY_OUTPUT.get(item, []):
            if all(self._count(name) >= count for name, count in recipe["ingredients"].items()):
                for name, count in recipe["ingredients"].items():
                    self._take(name, count)
                self._give_slot(item, int(recipe["outputCount"]))
                return

    def _smelt(self, item: str) -> None:
        """CraftingHelper.attemptSmelting with a furnace near (NearbySmeltCommands). Simplified fuel: one coal,
        planks or log burns per smelt (Malmo burns by burn time, totalBurnTimeInInventory/burnInventory)."""
        fuel = next((f for f in ("coal", "planks", "log") if self._count(f)), None)
        for recipe in mc.SMELTING_RECIPES_BY_OUTPUT.get(item, []):
            [(name, count)] = recipe["ingredients"].items()
            if fuel is not None and self._count(name) >= count and (name != fuel or self._count(name) > count):
                self._take(name, count)
                self._take(fuel, 1)
                self._give_slot(item, int(recipe["out"]))
                return

    def _functional(self, action: dict[str, Any]) -> None:
        if action.get("craft", "none") != "none":  # SimpleCraftCommands: no table needed
            self._craft(action["craft"])
        if action.get("craft_with_table", "none") != "none" and self._near("crafting table"):
            # NearbyCraftCommands: a table within 5 blocks of the head and in view; here: within 3 cells.
            self._craft(action["craft_with_table"])
        if action.get("smelt", "none") != "none" and self._near("furnace"):
            self._smelt(action["smelt"])
        equip = action.get("equip", "none")
        held = [i for i, slot in enumerate(self.inventory) if slot[0] == equip]
        if equip != "none" and held:  # EquipCommands: swap the first matching stack into the main hand
            self.inventory[0], self.inventory[held[0]] = self.inventory[held[0]], self.inventory[0]
        place = action.get("place", "none")
        is_block = any(r["type"] == place and r.get("block") is True for r in _MC_ITEMS)
        if place != "none" and is_block and self._count(place):
            # PlaceCommands: against the block looked at (toy world: the cell ahead when its floor is solid).
            x, y, z = self._facing_cell()
            if self.block(x, y, z) == "air" and self.block(x, y - 1, z) != "air":
                self.edits[(x, y, z)] = _display(place)
                self._take(place, 1)
        if action.get("drop") and self.inventory[0][0] != "air":  # the "drop" key drops one held item
            self._take(self.inventory[0][0], 1)

    def _apply_pending(self) -> None:
        for cmd in self._pending:
            words = cmd.split()
            if words[0] == "/replaceitem":
                # /replaceitem entity @p <slot> minecraft:<name> <quantity> <metadata>
                slot = _slot_from_cmd(words[3])
                if slot < N_INV_SLOTS:
                    self.inventory[slot] = [words[4].split(":", 1)[1], int(words[5]), int(words[6])]
            elif words[0] == "/kill" and len(words) == 1:
                self.life = 0.0
            elif words[0] == "/clear":
                self.inventory = [["air", 0, 0] for _ in range(N_INV_SLOTS)]
        self._pending.clear()

    def execute_cmd(self, cmd: str, action: dict[str, Any] | None = None):
        """minedojo.sim.cmd_executor.CMDExecutor.execute_cmd: only a fixed set of commands runs."""
        if not cmd.startswith("/") or cmd.split()[0][1:] not in VALID_CMDS:
            log.warning("Invalid cmd %s, skipping...", cmd)
            if action is None:
                return self._prev_obs, 0, self.is_terminated, self._prev_info
            return self.step(action)
        self.commands.append(cmd)
        action = action or self.action_space.no_op()
        action["chat"] = cmd
        return self.step(action)

    def set_inventory(self, inventory_list: list[InventoryItem], action: dict[str, Any] | None = None):
        obs, info = self._prev_obs, self._prev_info
        for item in inventory_list:
            slot = EQUIP_SLOTS[item.slot] if isinstance(item.slot, str) else item.slot
            assert 0 <= slot <= 40, f"invalid slot index {slot}"
            assert item.name in ALL_ITEMS, f"Unknown item {item.name}"
            obs, _, _, info = self.execute_cmd(
                f"/replaceitem entity @p {_cmd_slot(slot)} minecraft:{item.name} "
                f"{item.quantity or 1} {item.variant or 0}", action)
        return obs, 0, self.is_terminated, info

    def close(self) -> None:
        self.closed = True

    # --- observations -------------------------------------------------------------------------------
    def _rays(self) -> dict[str, np.ndarray]:
        n = len(self.lidar_rays)
        out: dict[str, Any] = {"block_name": [], "block_distance": [], "entity_name": [], "entity_distance": []}
        for _pitch, ray_yaw, max_distance in self.lidar_rays:
            world_yaw = self.yaw - math.degrees(ray_yaw)  # lidar yaw has the opposite sign (Plan4MC)
            dx, dz = self._direction(world_yaw)
            hit, distance = "air", float(max_distance)
            for k in range(1, int(max_distance * 2) + 1):
                d = k / 2
                name = self.block(math.floor(self.pos[0] + d * dx), 65, math.floor(self.pos[2] + d * dz))
                if name != "air":
                    hit, distance = name, d
                    break
            entity, entity_distance = "null", distance
            for e in self.entities:
                ex, ez = e["x"] - self.pos[0], e["z"] - self.pos[2]
                bearing = (math.degrees(math.atan2(-ex, ez)) - world_yaw + 180) % 360 - 180
                if abs(bearing) <= 7.5 and math.hypot(ex, ez) <= distance:
                    entity, entity_distance = e["name"], math.hypot(ex, ez)
            out["block_name"].append(hit)
            out["block_distance"].append(distance)
            out["entity_name"].append(entity)
            out["entity_distance"].append(entity_distance)
        rays = {k: np.asarray(v, dtype=np.float32 if "distance" in k else None) for k, v in out.items()}
        rays["ray_pitch"] = np.asarray([r[0] for r in self.lidar_rays], dtype=np.float32)
        rays["ray_yaw"] = np.asarray([r[1] for r in self.lidar_rays], dtype=np.float32)
        for key in ("block_meta", "harvest_level"):
            rays[key] = np.zeros(n, dtype=np.int64)
        for key in ("is_tool_not_required", "blocks_movement", "is_liquid", "is_solid", "can_burn"):
            rays[key] = np.zeros(n, dtype=bool)
        for key in ("traced_block_x", "traced_block_y", "traced_block_z"):
            rays[key] = np.zeros(n, dtype=np.float32)
        return rays

    def _observe(self) -> tuple[dict[str, Any], dict[str, Any]]:
        h, w = self.image_size
        base = np.floor(self.pos).astype(int)
        frame_seed = zlib.crc32(f"{self.world_hash}:{self.pos.round(2)}:{round(self.yaw)}:{round(self.pitch)}:"
                                f"{self.block(*self._facing_cell())}".encode())
        rgb = np.random.default_rng(frame_seed).integers(0, 256, size=(3, h, w), dtype=np.uint8)
        names = np.asarray([_display(s[0]) for s in self.inventory])
        inventory = {
            "name": names,
            "variant": np.asarray([s[2] for s in self.inventory], dtype=np.int64),
            "quantity": np.asarray([s[1] for s in self.inventory], dtype=np.float32),
            "max_durability": np.full(N_INV_SLOTS, -1, dtype=np.float32),
            "cur_durability": np.full(N_INV_SLOTS, -1, dtype=np.float32),
        }
        equipment = {"name": np.asarray([names[0]] + ["air"] * 5), "quantity": np.zeros(6, dtype=np.float32)}
        near = {self.block(base[0] + dx, base[1] + dy, base[2] + dz)
                for dx in range(-3, 4) for dy in range(-1, 2) for dz in range(-3, 4)}
        damage = {"damage_amount": np.zeros(1, np.float32), "damage_distance": np.zeros(1, np.float32),
                  "damage_pitch": np.zeros(1, np.float32), "damage_yaw": np.zeros(1, np.float32),
                  "hunger_damage": np.zeros(1, np.float32)}
        for key in ("is_explosion", "is_fire_damage", "is_magic_damage", "is_projectile", "is_unblockable"):
            damage[key] = np.array(bool(self.damage.get(key, False)))
        if "damage_distance" in self.damage:
            damage["damage_distance"] = np.array([self.damage["damage_distance"]], np.float32)
        obs: dict[str, Any] = {
            "rgb": rgb,
            "inventory": inventory,
            "equipment": equipment,
            "life_stats": {
                "life": np.array([self.life], np.float32), "armor": np.zeros(1, np.float32),
                "food": np.array([self.food], np.float32), "saturation": np.array([5.0], np.float32),
                "xp": np.zeros(1, np.float32), "oxygen": np.array([self.oxygen], np.float32),
                "is_sleeping": 0,
            },
            "location_stats": {
                "pos": self.pos.astype(np.float32), "yaw": np.array([self.yaw], np.float32),
                "pitch": np.array([self.pitch], np.float32), "biome_id": np.array(1),
                "rainfall": np.array([0.4], np.float32), "temperature": np.array([0.8], np.float32),
                "is_raining": np.array(0), "light_level": np.array([15.0], np.float32),
                "sky_light_level": np.array([1.0], np.float32), "sun_brightness": np.array([1.0], np.float32),
                "can_see_sky": np.array(1), "sea_level": np.array([63.0], np.float32),
            },
            "nearby_tools": {"table": np.array("crafting table" in near), "furnace": np.array("furnace" in near)},
            "damage_source": damage,
        }
        self.damage = {}  # Malmo reports each damage event once
        if self.use_voxel:
            v = self.voxel_size
            grid = [[[self.block(base[0] + x, base[1] + y, base[2] + z)
                      for z in range(v["zmin"], v["zmax"] + 1)]
                     for y in range(v["ymin"], v["ymax"] + 1)]
                    for x in range(v["xmin"], v["xmax"] + 1)]
            obs["voxels"] = {"block_name": np.asarray(grid),
                             "is_liquid": np.isin(np.asarray(grid), ["water", "lava"])}
        if self.use_lidar:
            obs["rays"] = self._rays()
        info = {"life": self.life, "food": self.food, "is_dead": self.life <= 0,
                "living_death_event_fired": self.dead_event,
                "xpos": float(self.pos[0]), "ypos": float(self.pos[1]), "zpos": float(self.pos[2])}
        self._prev_obs, self._prev_info = obs, info
        return obs, info


class _Task:
    """Stands in for the meta-task layer (MetaTaskBase + FastResetWrapper around MineDojoSim)."""

    def __init__(self, sim: FakeSim, fast_reset: bool, target: tuple[str, int] | None = None,
                 initial_mobs: list[str] | None = None, seed: int | None = None) -> None:
        self.env = sim
        self.fast_reset = fast_reset
        self.target = target
        self.initial_mobs = initial_mobs or []
        self._seed = seed
        self._started = False
        self._initial = 0

    def _target_count(self, obs: dict[str, Any]) -> int:
        if self.target is None:
            return 0
        names = list(obs["inventory"]["name"])
        return int(sum(q for n, q in zip(names, obs["inventory"]["quantity"], strict=True)
                       if n == _display(self.target[0])))

    def seed(self, seed: int | None = None) -> None:
        self._seed = seed
        self.env.seed(seed)

    def reset(self) -> dict[str, Any]:
        sim = self.env
        if self.fast_reset and self._started:
            # FastResetWrapper: /kill + random teleport; world edits are kept, position is random.
            edits = dict(sim.edits)
            obs = sim.reset()
            sim.edits.update(edits)
            sim.pos[0] += float(np.random.default_rng().integers(-200, 200))
        else:
            obs = sim.reset()
        self._started = True
        rng = np.random.default_rng(self._seed)
        for mob in self.initial_mobs:
            sim.spawn(mob, distance=float(rng.uniform(2.0, 2.5)), bearing=0.0)
        obs, _info = sim._observe()
        self._initial = self._pre = self._target_count(obs)
        return obs

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        obs, _reward, _done, info = self.env.step(action)
        count = self._target_count(obs)
        reward = float(max(0, count - self._pre)) if self.target else 0.0
        self._pre = count
        success = self.target is not None and count - self._initial >= self.target[1]
        return obs, reward, self.env.is_terminated or success, info

    def close(self) -> None:
        self.env.close()


_MOVE_KEYS = (("forward", "back"), ("left", "right"), ("jump", "sneak", "sprint"))


class FakeARNNWrapper:
    """Stands in for minedojo.sim.wrappers.ARNNWrapper: the 8-dim MultiDiscrete action interface."""

    def __init__(self, task: _Task, cam_interval: float = 15) -> None:
        self.env = task
        self.cam_interval = cam_interval
        n_bins = math.ceil(360 / cam_interval) + 1
        self.action_space = _MultiDiscrete((3, 3, 4, n_bins, n_bins, 8, len(mc.ALL_CRAFT_SMELT_ITEMS), N_INV_SLOTS),
                                           (0, 0, 0, (n_bins - 1) // 2, (n_bins - 1) // 2, 0, 0, 0))
        self.actions: list[np.ndarray] = []
        self._inventory_names: np.ndarray | None = None

    @property
    def unwrapped(self) -> FakeSim:
        return self.env.env

    def __getattr__(self, name: str) -> Any:  # gym.Wrapper forwards public attributes
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self) -> dict[str, Any]:
        obs = self.env.reset()
        self._inventory_names = obs["inventory"]["name"].copy()  # NNActionSpaceWrapper.reset
        return obs

    def seed(self, seed: int | None = None) -> None:
        self.env.seed(seed)

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        assert self.action_space.contains(action), f"invalid action {action!r}"
        action = np.asarray(action)
        self.actions.append(action.copy())
        noop = self.unwrapped.action_space.no_op()
        for index, keys in enumerate(_MOVE_KEYS):  # the first three dims: 0 is none, k is keys[k - 1]
            if action[index]:
                noop[keys[action[index] - 1]] = 1
        noop["camera"][0] = float(action[3]) * self.cam_interval + (-180)
        noop["camera"][1] = float(action[4]) * self.cam_interval + (-180)
        # Functional actions as NNActionSpaceWrapper.action/step (sim/wrappers/ar_nn/nn_action_space_wrapper.py,
        # strict_check=True as ARNNWrapper builds it): the slot argument is read from the inventory names of the
        # last observation this wrapper returned; destroy is set_inventory(air); two no-op ticks follow 2, 4-7.
        destroy_slot = None
        fn = int(action[5])
        if fn == 1:
            noop["use"] = 1
        elif fn == 2:
            noop["drop"] = 1
        elif fn == 3:
            noop["attack"] = 1
        elif fn == 4:
            item = mc.ALL_CRAFT_SMELT_ITEMS[int(action[6])]
            if item in mc.ALL_HAND_CRAFT_ITEMS_NN_ACTIONS:
                noop["craft"] = item
            elif item in mc.ALL_TABLE_CRAFT_ONLY_ITEMS_NN_ACTIONS:
                noop["craft_with_table"] = item
            elif item in mc.ALL_SMELT_ITEMS_NN_ACTIONS:
                noop["smelt"] = item
            else:
                raise ValueError(f"Unknown item {item} to craft/smelt!")
        elif fn in (5, 6, 7):
            assert self._inventory_names is not None
            item_id = str(self._inventory_names[int(action[7])]).replace(" ", "_")
            if item_id == "air":
                verb = ("equip", "place", "destroy")[fn - 5]
                raise ValueError(f"Trying to {verb} air, raise error with strict check.")
            if fn == 5:
                noop["equip"] = item_id
            elif fn == 6:
                noop["place"] = item_id
            else:
                destroy_slot = int(action[7])
        if destroy_slot is not None:
            obs, reward, done, info = self.unwrapped.set_inventory(
                inventory_list=[InventoryItem(name="air", slot=destroy_slot, quantity=1, variant=0)], action=noop)
        else:
            obs, reward, done, info = self.env.step(noop)
        if fn in (2, 4, 5, 6, 7):
            for _ in range(2):
                obs, reward, done, info = self.env.step(self.unwrapped.action_space.no_op())
        self._inventory_names = obs["inventory"]["name"].copy()
        return obs, reward, done, info

    def close(self) -> None:
        self.env.close()


def _harvest(*, target_names: str, target_quantities: int, reward_weights: float = 1.0,
             initial_mobs: str | list[str] | None = None, initial_mob_spawn_range_low: Any = None,
             initial_mob_spawn_range_high: Any = None, initial_inventory: list[InventoryItem] | None = None,
             seed: int | None = None, world_seed: str | None = None, fast_reset: bool = True,
             image_size: int | tuple[int, int], use_voxel: bool = False, voxel_size: dict[str, int] | None = None,
             use_lidar: bool = False, lidar_rays: Any = None, specified_biome: Any = None,
             start_at_night: bool = False) -> _Task:
    """HarvestMeta's keyword-only signature (no regenerate_world_after_reset, as in MineDojo)."""
    sim = FakeSim(image_size=image_size, initial_inventory=initial_inventory, world_seed=world_seed, seed=seed,
                  use_voxel=use_voxel, voxel_size=voxel_size, use_lidar=use_lidar, lidar_rays=lidar_rays,
                  specified_biome=specified_biome)
    mobs = [initial_mobs] if isinstance(initial_mobs, str) else list(initial_mobs or [])
    return _Task(sim, fast_reset, target=(target_names, int(target_quantities)), initial_mobs=mobs, seed=seed)


_PROGRAMMATIC_TASKS.update({
    # Copied (abridged) from minedojo/tasks/description_files/tasks_specs.yaml.
    "harvest_milk_with_empty_bucket_and_cow": {
        "target_names": "milk_bucket", "target_quantities": 1, "reward_weights": 1, "initial_mobs": "cow",
        "initial_mob_spawn_range_low": [-10, 1, -10], "initial_mob_spawn_range_high": [10, 1, 10],
        "initial_inventory": [InventoryItem(slot="mainhand", name="bucket")],
        "use_voxel": True, "voxel_size": _VOXEL_3, "use_lidar": False,
    },
    "harvest_wool_with_shears_and_sheep": {
        "target_names": "wool", "target_quantities": 1, "reward_weights": 1, "initial_mobs": "sheep",
        "initial_mob_spawn_range_low": [-10, 1, -10], "initial_mob_spawn_range_high": [10, 1, 10],
        "initial_inventory": [InventoryItem(slot="mainhand", name="shears")],
        "use_voxel": True, "voxel_size": _VOXEL_3, "use_lidar": False,
    },
    "harvest_1_log": {"target_names": "log", "target_quantities": 1, "reward_weights": 1,
                      "use_voxel": True, "voxel_size": _VOXEL_3, "use_lidar": False},
})


def make(task_id: str, *args: Any, cam_interval: int | float = 15, **kwargs: Any) -> FakeARNNWrapper:
    """minedojo.make: a programmatic task id, or "open-ended"."""
    MAKE_CALLS.append({"task_id": task_id, "cam_interval": cam_interval, **kwargs})
    if task_id in _PROGRAMMATIC_TASKS:
        spec = dict(_PROGRAMMATIC_TASKS[task_id])
        task = _harvest(*args, **spec, **kwargs)  # a repeated key raises TypeError, as in MineDojo
    elif task_id.lower() == "open-ended":
        fast_reset = kwargs.pop("fast_reset", False)
        kwargs.pop("fast_reset_random_teleport_range", None)
        task = _Task(FakeSim(*args, **kwargs), fast_reset, seed=kwargs.get("seed"))
    else:
        raise ValueError(f"Invalid task id provided {task_id}")
    return FakeARNNWrapper(task, cam_interval=cam_interval)


sim = types.ModuleType("minedojo.sim")
"""Stands in for the ``minedojo.sim`` subpackage (``from minedojo.sim import InventoryItem``)."""
sim.InventoryItem = InventoryItem
sim.ALL_ITEMS = ALL_ITEMS
sim.MineDojoSim = FakeSim


# --- minedojo.sim.mc_meta.mc: Minecraft's recipe and item data ---------------------------------------
# mc_constants_subset.json (beside this file): a SUBSET of MineDojo's real minedojo/sim/mc_meta/mc_constants.json
# (Malmo's dump of Minecraft's rules), copied entry by entry without change: every recipe for the outputs the tests
# use and the item records of the items they involve (the real file has hundreds of items and recipes). Duplicates
# are kept as the real file has them (planks is listed once per wood variant).
_MC_DATA = json.loads((Path(__file__).parent / "mc_constants_subset.json").read_text())
_MC_CRAFTING_RECIPES: list[dict[str, Any]] = _MC_DATA["craftingRecipes"]
_MC_SMELTING_RECIPES: list[dict[str, Any]] = _MC_DATA["smeltingRecipes"]
_MC_ITEMS: list[dict[str, Any]] = _MC_DATA["items"]


def _recipes_by_output(recipes: list[dict[str, Any]], item_names: list[str]) -> dict[str, list[dict[str, Any]]]:
    """mc.py's sort_recipes_by_output: a list per item (empty ones too), empty and circular recipes dropped,
    duplicates (equal by value) dropped."""
    result: dict[str, list[dict[str, Any]]] = {item: [] for item in item_names}
    for recipe in recipes:
        if not recipe["ingredients"] or recipe["outputItemName"] in recipe["ingredients"]:
            continue
        if recipe not in result[recipe["outputItemName"]]:
            result[recipe["outputItemName"]].append(recipe)
    return result


mc = types.ModuleType("minedojo.sim.mc_meta.mc")
"""Stands in for ``minedojo.sim.mc_meta.mc``: the names it builds from mc_constants.json, over the subset above."""
mc.all_data = {"craftingRecipes": _MC_CRAFTING_RECIPES, "smeltingRecipes": _MC_SMELTING_RECIPES, "items": _MC_ITEMS}
mc.ALL_ITEMS = sorted(item["type"] for item in _MC_ITEMS)
mc.CRAFTING_RECIPES_BY_OUTPUT = _recipes_by_output(_MC_CRAFTING_RECIPES, mc.ALL_ITEMS)
mc.SMELTING_RECIPES_BY_OUTPUT = _recipes_by_output(_MC_SMELTING_RECIPES, mc.ALL_ITEMS)
mc.N_INV_SLOTS = N_INV_SLOTS
# The NN craft-argument lists, built as mc.py builds them (minedojo/sim/mc_meta/mc.py, ALL_PERSONAL_CRAFTING_ITEMS
# ... ALL_CRAFT_SMELT_ITEMS), over the subset above: the real list has 244 items, this one fewer.
mc.ALL_PERSONAL_CRAFTING_ITEMS = sorted(
    r["type"] for r in _MC_ITEMS if mc.CRAFTING_RECIPES_BY_OUTPUT.get(r["type"])
    and all(x["recipeSize"] in [0, 1, 2, 4] for x in mc.CRAFTING_RECIPES_BY_OUTPUT[r["type"]]))
mc.ALL_CRAFTING_TABLE_ITEMS = sorted(
    r["type"] for r in _MC_ITEMS if mc.CRAFTING_RECIPES_BY_OUTPUT.get(r["type"])
    and any(x["recipeSize"] <= 9 for x in mc.CRAFTING_RECIPES_BY_OUTPUT[r["type"]]))
mc.ALL_CRAFTING_TABLE_ONLY_ITEMS = sorted(
    x for x in mc.ALL_CRAFTING_TABLE_ITEMS if x not in mc.ALL_PERSONAL_CRAFTING_ITEMS)
mc.ALL_SMELTING_ITEMS = sorted(r["type"] for r in _MC_ITEMS if mc.SMELTING_RECIPES_BY_OUTPUT.get(r["type"]))
mc.ALL_HAND_CRAFT_ITEMS_NN_ACTIONS = [
    x for x in mc.ALL_PERSONAL_CRAFTING_ITEMS
    if x not in ["coal", "diamond", "emerald", "gold_ingot", "iron_ingot", "redstone", "stone"]]
mc.ALL_TABLE_CRAFT_ONLY_ITEMS_NN_ACTIONS = [
    x for x in mc.ALL_CRAFTING_TABLE_ONLY_ITEMS if x not in ["iron_ingot", "gold_ingot"]]
mc.ALL_SMELT_ITEMS_NN_ACTIONS = [x for x in mc.ALL_SMELTING_ITEMS if x not in ["iron_nugget", "dye", "gold_nugget"]]
mc.ALL_CRAFT_SMELT_ITEMS = (mc.ALL_HAND_CRAFT_ITEMS_NN_ACTIONS + mc.ALL_TABLE_CRAFT_ONLY_ITEMS_NN_ACTIONS
                            + mc.ALL_SMELT_ITEMS_NN_ACTIONS)
mc_meta = types.ModuleType("minedojo.sim.mc_meta")
mc_meta.mc = mc
sim.mc_meta = mc_meta

MODULES = {"minedojo": sys.modules[__name__], "minedojo.sim": sim, "minedojo.sim.mc_meta": mc_meta,
           "minedojo.sim.mc_meta.mc": mc}
"""The module names this stand-in answers to, for ``sys.modules`` (see :func:`install`)."""


def install(monkeypatch: Any) -> None:
    """Registers the stand-in as ``minedojo`` and its submodules for one test (``pytest.MonkeyPatch``)."""
    MAKE_CALLS.clear()
    for name, module in MODULES.items():
        monkeypatch.setitem(sys.modules, name, module)
