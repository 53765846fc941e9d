"""Recipe helpers of the skill `agent`, from the world's rules (runs inside the sandbox worker: pure Python).

The server turns ``WorldRules`` into plain data once (:func:`compact_rules`); the worker's agent answers
"what does X need" and "what is missing to do X here, now" from it, so a skill never hard-codes amounts.
"""

from __future__ import annotations

from typing import Any


def compact_rules(rules: Any) -> dict[str, Any]:
    """JSON-able requirements keyed by action, item and achievement (server side, from a WorldRules message)."""
    entries: dict[str, dict[str, Any]] = {}

    def add(keys: list[str], entry: dict[str, Any]) -> None:
        for key in keys:
            if key and key not in entries:
                entries[key] = entry

    for r in rules.make:
        add([r.action, r.item, r.achievement], {
            "action": r.action, "uses": {c.item: c.count for c in r.uses}, "holds": {}, "nearby": list(r.nearby),
            "faced": [], "gives": {r.item: r.gives or 1}})
    for r in rules.place:
        add([r.action, r.achievement, r.item], {
            "action": r.action, "uses": {c.item: c.count for c in r.uses}, "holds": {}, "nearby": list(r.nearby),
            "faced": list(r.where), "gives": {}})
    for r in rules.collect:
        gives = {c.item: c.count for c in r.receives}
        add([*r.achievements, *gives], {
            "action": r.action, "uses": {}, "holds": {c.item: c.count for c in r.requires}, "nearby": [],
            "faced": [r.material], "gives": gives, "probability": r.probability or 1.0})
    # Cells the interact action turns into walkable ground, with what must be held: explore() digs through them.
    walkable = set(rules.walkable)
    diggable = {r.material: {c.item: c.count for c in r.requires} for r in rules.collect
                if r.leaves in walkable and r.material not in walkable}
    return {"nearby_distance": int(rules.nearby_distance), "entries": entries, "diggable": diggable}


class Recipes:
    """Answers requirement questions from :func:`compact_rules` data."""

    def __init__(self, data: dict[str, Any] | None):
        data = data or {}
        self.nearby_distance = int(data.get("nearby_distance", 1))
        self._entries: dict[str, dict[str, Any]] = data.get("entries", {})
        self.diggable: dict[str, dict[str, int]] = data.get("diggable", {})
        """Material -> items that must be held for the interact action to turn it into walkable ground."""

    def needs(self, name: str) -> dict[str, Any] | None:
        """A copy of what ``name`` (an item, action or achievement) needs, or None when no rule covers it."""
        entry = self._entries.get(str(name))
        if entry is None:
            return None
        return {"action": entry["action"], "uses": dict(entry["uses"]), "holds": dict(entry["holds"]),
                "nearby": list(entry["nearby"]), "faced": list(entry["faced"]), "gives": dict(entry["gives"])}

    def missing(self, name: str, inventory: dict[str, int], nearby: set[str], faced: str | None) -> list[str]:
        """What stops ``name`` from working right now, in words; [] when it would work."""
        entry = self._entries.get(str(name))
        if entry is None:
            return [f"no rule of the game makes, places or collects {name!r}"]
        gaps = []
        for item, count in list(entry["uses"].items()) + list(entry["holds"].items()):
            have = inventory.get(item, 0)
            if have < count:
                gaps.append(f"{count - have} more {item} (have {have}, need {count})")
        for material in entry["nearby"]:
            if material not in nearby:
                gaps.append(f"a {material} within {self.nearby_distance} cell of the player")
        if entry["faced"] and faced not in entry["faced"]:
            gaps.append(f"facing {' or '.join(entry['faced'])} (facing {faced})")
        return gaps
