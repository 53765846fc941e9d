"""Reading the world's rules (``rlgpt.v1.WorldRules``, served by the env server in ``Describe``).

The env server owns the rules and generates them from the game; this module only interprets the message,
so the planner, the critic and the env server's own prompt text answer "what does X need" the same way.
"""

from __future__ import annotations

import dataclasses

from rlgpt.v1 import common_pb2


def _counts(counts: list[common_pb2.ItemCount]) -> dict[str, int]:
    return {c.item: c.count for c in counts}


def _text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {item}" for item, n in counts.items()) or "nothing"


@dataclasses.dataclass(frozen=True)
class Requirement:
    """What one way of obtaining a thing needs: items used up, items held, things nearby, and the action."""

    action: str
    uses: dict[str, int]
    holds: dict[str, int]
    nearby: tuple[str, ...]
    where: tuple[str, ...] = ()
    """Faced-cell materials (placing) or the material to face (collecting)."""
    gives: int = 1
    probability: float = 1.0


def ways_to_get(rules: common_pb2.WorldRules, item: str) -> list[Requirement]:
    """Every rule that puts ``item`` into the inventory (collect and make rules)."""
    found = []
    for rule in rules.collect:
        receives = _counts(list(rule.receives))
        if item in receives:
            found.append(Requirement(action=rule.action, uses={}, holds=_counts(list(rule.requires)), nearby=(),
                                     where=(rule.material,), gives=receives[item],
                                     probability=rule.probability or 1.0))
    for rule in rules.make:
        if rule.item == item:
            found.append(Requirement(action=rule.action, uses=_counts(list(rule.uses)), holds={},
                                     nearby=tuple(rule.nearby), gives=rule.gives or 1))
    return found


def achievement_rule(rules: common_pb2.WorldRules, achievement: str) -> Requirement | None:
    """How ``achievement`` is unlocked, where a rule says so (collect, place, make)."""
    for rule in rules.collect:
        if achievement in rule.achievements:
            return Requirement(action=rule.action, uses={}, holds=_counts(list(rule.requires)), nearby=(),
                               where=(rule.material,), probability=rule.probability or 1.0)
    for rule in rules.place:
        if rule.achievement == achievement:
            return Requirement(action=rule.action, uses=_counts(list(rule.uses)), holds={}, nearby=tuple(rule.nearby),
                               where=tuple(rule.where))
    for rule in rules.make:
        if rule.achievement == achievement:
            return Requirement(action=rule.action, uses=_counts(list(rule.uses)), holds={}, nearby=tuple(rule.nearby),
                               gives=rule.gives or 1)
    return None


def achievement_items(rules: common_pb2.WorldRules, achievement: str) -> dict[str, int]:
    """What unlocking ``achievement`` leaves in the inventory at least: what the collect rule that unlocks it
    receives, or what the make rule that unlocks it gives (no achievement name is read: a game names them its way)."""
    for rule in rules.collect:
        if achievement in rule.achievements:
            return _counts(list(rule.receives))
    for rule in rules.make:
        if rule.achievement == achievement:
            return {rule.item: rule.gives or 1}
    return {}


def tools_needed(rules: common_pb2.WorldRules, achievement_or_item: str) -> dict[str, int]:
    """Items that must be held (not used up) to unlock an achievement or collect an item, e.g. a pickaxe."""
    rule = achievement_rule(rules, achievement_or_item)
    if rule is not None:
        return dict(rule.holds)
    ways = ways_to_get(rules, achievement_or_item)
    return dict(ways[0].holds) if len(ways) == 1 else {}


def render_rules(rules: common_pb2.WorldRules, status: tuple[str, ...] = ()) -> str:
    """The rules as prompt text: one line per rule, amounts included, then the facts."""
    lines = ["Collecting (face the material and use the action):"] if rules.collect else []
    for rule in rules.collect:
        needs = f" while holding {_text(_counts(list(rule.requires)))}" if rule.requires else ""
        chance = f" with probability {rule.probability:g}" if rule.probability and rule.probability < 1 else ""
        after = "the cell stays" if rule.leaves == rule.material else f"the cell becomes {rule.leaves}"
        unlocks = f"; achievement {', '.join(rule.achievements)}" if rule.achievements else ""
        lines.append(f"- {rule.action} on {rule.material}{needs}: +{_text(_counts(list(rule.receives)))}{chance}; "
                     f"{after}{unlocks}")
    if rules.place:
        lines.append("Placing (into the faced cell):")
    for rule in rules.place:
        near = f"; needs {' and '.join(rule.nearby)} nearby" if rule.nearby else "; nothing needs to be nearby"
        lines.append(f"- {rule.action}: uses {_text(_counts(list(rule.uses)))}; the faced cell must be "
                     f"{' or '.join(rule.where)}{near}" + (f"; achievement {rule.achievement}" if rule.achievement
                                                            else ""))
    if rules.make:
        lines.append("Making (the player can face any direction):")
    for rule in rules.make:
        near = f"; needs {' and '.join(rule.nearby)} nearby" if rule.nearby else ""
        lines.append(f"- {rule.action}: uses {_text(_counts(list(rule.uses)))}{near}; gives {rule.gives} "
                     f"{rule.item}" + (f"; achievement {rule.achievement}" if rule.achievement else ""))
    limits = [f"{i.item} {i.initial}/{i.max}" for i in rules.items if i.item in status]
    if limits:
        lines.append("Status at the start / maximum: " + ", ".join(limits) + "; every item holds at most "
                     f"{max((i.max for i in rules.items if i.item not in status), default=0)}.")
    if rules.walkable:
        lines.append(f"Walkable cells: {', '.join(rules.walkable)}; every other cell blocks movement.")
    lines.extend(f"- {fact}" for fact in rules.facts)
    return "\n".join(lines)
