"""What an attempt needed but never had, read from the world's rules the planner passes on.

Every name and requirement comes from ``JudgeRequest.rules`` (the game's rules, served by the env server's
``Describe``); without rules no prerequisite is found.
"""

from __future__ import annotations

import functools
import re

from rlgpt.v1 import common_pb2, critic_pb2
from rlgpt.world_rules import Requirement, achievement_items, achievement_rule, ways_to_get

MAX_TOOL_DEPTH = 8


def _rule_for(rules: common_pb2.WorldRules, name: str) -> Requirement | None:
    """The rule that unlocks an achievement, or the one way the rules give an item (None when several or none)."""
    rule = achievement_rule(rules, name)
    if rule is None:
        ways = ways_to_get(rules, name)
        rule = ways[0] if len(ways) == 1 else None
    return rule


def required_tools(rules: common_pb2.WorldRules, name: str, start: dict[str, int], depth: int = 0) -> list[str]:
    """Items that must be held (not used up) to reach ``name`` (an achievement or an item), read from the rules:
    the tools of the rule itself and of the rules that give the materials it uses which ``start`` lacks
    (place_furnace uses stone; stone needs a wood_pickaxe)."""
    rule = _rule_for(rules, name)
    if rule is None or depth > MAX_TOOL_DEPTH:
        return []
    tools = list(rule.holds)
    for item, count in rule.uses.items():
        if start.get(item, 0) < count:
            tools += required_tools(rules, item, start, depth + 1)
    return list(dict.fromkeys(tools))


def prerequisite_words(rules: common_pb2.WorldRules) -> tuple[str, ...]:
    """Names a text can say it lacks ("needs a wood_pickaxe"): tools, made and placed things, nearby stations."""
    words = [i.item for r in rules.collect for i in r.requires] + [r.item for r in rules.make]
    words += [r.item for r in rules.place] + [m for r in (*rules.place, *rules.make) for m in r.nearby]
    return tuple(sorted(set(words), key=lambda w: (-len(w), w)))


@functools.lru_cache(maxsize=8)
def _needs_pattern(words: tuple[str, ...]) -> re.Pattern[str] | None:
    if not words:
        return None
    return re.compile(r"\b(?:needs?|requires?|missing|without)\s+(?:an?\s+|the\s+)?("
                      + "|".join(re.escape(w) for w in words) + r")\b")


def obtained(rules: common_pb2.WorldRules, rollouts: list[common_pb2.EpisodeSummary],
             start: dict[str, int]) -> set[str]:
    """What some episode held or put into the world: start items, final inventories, and what the unlocked
    achievements give or place (a placed table never shows in the inventory; its achievement does)."""
    held = {item for item, count in start.items() if count > 0}
    held |= {i.item for r in rollouts for i in r.final_inventory if i.count > 0}
    placed = {rule.achievement: rule.item for rule in rules.place if rule.achievement}
    for achievement in {a for r in rollouts for a in r.achievements}:
        held |= set(achievement_items(rules, achievement))
        if achievement in placed:
            held.add(placed[achievement])
    return held


def missing_items(request: critic_pb2.JudgeRequest, errors: list[common_pb2.SkillError],
                  success_rate: float) -> dict[str, str]:
    """Things the attempt needed but never had, each with why: named in errors or trajectories ("needs a
    wood_pickaxe"), or, when nothing succeeded, a tool the rules require for a success condition."""
    rules = request.rules
    rollouts = list(request.rollouts)
    start = {i.item: i.count for i in request.start_inventory}
    held = obtained(rules, rollouts, start)
    found: dict[str, str] = {}
    pattern = _needs_pattern(prerequisite_words(rules))
    if pattern is not None:
        for text in [e.message for e in errors] + [r.text for r in rollouts]:
            for match in pattern.finditer(text.lower()):
                item = match.group(1)
                if item not in held and item not in found:
                    found[item] = f"named in text: {match.group(0)!r}"
    if rollouts and success_rate == 0:
        for condition in request.success:
            name = condition.achievement if condition.WhichOneof("kind") == "achievement" else condition.inventory.item
            for tool in required_tools(rules, name, start):
                if tool not in found and tool not in held:
                    found[tool] = (f"the rules say {name} needs a {tool} held, and no episode ever held one (nor "
                                   "started with one)")
    return found
