"""What one perception says, for the trajectory text (trajectory.py): where the
player is, its needs, what is near or faced; and which things a task needs the player to find.

Reads Crafter's perception (position, status, view) and tolerates others (MineDojo: (x, y, z), life).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlgpt.v1 import common_pb2

Cell = tuple[int, int]
MOVE_STEPS = {"move_left": (-1, 0), "move_right": (1, 0), "move_up": (0, -1), "move_down": (0, 1)}


def position_of(perception: dict[str, Any]) -> Cell | None:
    position = perception.get("position")
    if not position:
        return None
    if len(position) == 3:  # MineDojo (x, y, z): the ground plane is x, z
        return round(position[0]), round(position[2])
    return int(position[0]), int(position[1])


def status_of(perception: dict[str, Any]) -> dict[str, int]:
    if "status" in perception:
        return {k: int(v) for k, v in perception["status"].items()}
    return {k: round(perception[k]) for k in ("life", "food") if isinstance(perception.get(k), (int, float))}


def view_cells(perception: dict[str, Any]) -> Iterable[tuple[Cell, str]]:
    x0, y0 = perception["view_origin"]
    for dy, row in enumerate(perception["view"]):
        for dx, name in enumerate(row):
            yield (x0 + dx, y0 + dy), name


def nearest_in_view(perception: dict[str, Any], name: str, position: Cell) -> Cell | None:
    cells = [cell for cell, seen in view_cells(perception) if seen == name]
    return min(cells, key=lambda c: (distance(c, position), c[1], c[0])) if cells else None


def near(perception: dict[str, Any], name: str, within: int) -> bool:
    position = position_of(perception)
    if "view" not in perception or position is None:
        return False
    return any(seen == name and distance(cell, position) <= within for cell, seen in view_cells(perception))


def cell_at(perception: dict[str, Any], cell: Cell) -> str:
    if "view" not in perception:
        return ""
    x0, y0 = perception["view_origin"]
    view = perception["view"]
    row, column = cell[1] - y0, cell[0] - x0
    return view[row][column] if 0 <= row < len(view) and 0 <= column < len(view[row]) else ""


def facing_name(perception: dict[str, Any]) -> str:
    position, facing = position_of(perception), perception.get("facing")
    if position is None or not facing or len(facing) != 2:
        return ""
    return cell_at(perception, (position[0] + int(facing[0]), position[1] + int(facing[1])))


def moved_into(action: str, before: dict[str, Any]) -> str:
    position = position_of(before)
    if action not in MOVE_STEPS or position is None:
        return ""
    dx, dy = MOVE_STEPS[action]
    return cell_at(before, (position[0] + dx, position[1] + dy))


def on_border(position: Cell, perception: dict[str, Any]) -> bool:
    area = perception.get("area")
    if not area:
        return False
    return position[0] in (0, area[0] - 1) or position[1] in (0, area[1] - 1)


def distance(a: Cell, b: Cell) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def cell_text(cell: Cell | None) -> str:
    return "(?)" if cell is None else f"({cell[0]}, {cell[1]})"


def step_text(step: int, position: Cell | None) -> str:
    return f"step {step}" if position is None else f"step {step} at {cell_text(position)}"


# Achievements about creatures: the rules cover materials and items, not who to meet.
_CREATURE_ACHIEVEMENTS = {"eat_cow": "cow", "eat_plant": "plant", "defeat_zombie": "zombie",
                          "defeat_skeleton": "skeleton"}


def watch_names(rules: common_pb2.WorldRules | None, achievements: Iterable[str], items: Iterable[str]) -> list[str]:
    """What a task needs the player to find, from the world's rules: the materials its items are collected
    from, the stations making them needs nearby, and the creatures its achievements are about. Walkable
    materials (grass: everywhere) are left out."""
    names: list[str] = []
    if rules is None:
        return [_CREATURE_ACHIEVEMENTS[a] for a in achievements if a in _CREATURE_ACHIEVEMENTS]
    walkable = set(rules.walkable)

    def sources(item: str, depth: int = 0) -> None:
        if depth > 3:  # recipes are shallow; this only guards against a cycle in the rules
            return
        for rule in rules.collect:
            if item in {c.item for c in rule.receives} and rule.material not in walkable:
                names.append(rule.material)
        for rule in rules.make:
            if rule.item == item:
                names.extend(rule.nearby)
                for used in rule.uses:
                    sources(used.item, depth + 1)

    for achievement in achievements:
        if achievement in _CREATURE_ACHIEVEMENTS:
            names.append(_CREATURE_ACHIEVEMENTS[achievement])
        for rule in rules.collect:
            if achievement in rule.achievements and rule.material not in walkable:
                names.append(rule.material)
        for rule in rules.make:
            if rule.achievement == achievement:
                sources(rule.item)
        for rule in rules.place:
            if rule.achievement == achievement:
                names.extend(rule.nearby)
                for used in rule.uses:
                    sources(used.item)
    for item in items:
        sources(item)
    return list(dict.fromkeys(names))
