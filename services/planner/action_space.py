"""The action-space and reward completion rules: what the planner adds to an RL config whose agent left out the
actions or the reward its own success condition needs (read from the world's rules, never assumed)."""

from __future__ import annotations

import re

from rlgpt.v1 import common_pb2, env_pb2, learner_pb2
from rlgpt.world_rules import achievement_rule, ways_to_get

_QUOTED = re.compile(r'"([a-z_]+)"')


def _interact_action(rules: common_pb2.WorldRules) -> str | None:
    """The action the rules collect with, when they use one for every material."""
    actions = {rule.action for rule in rules.collect if rule.action}
    return actions.pop() if len(actions) == 1 else None


def actions_for(condition: common_pb2.Condition, rules: common_pb2.WorldRules, actions: list[str]) -> list[str]:
    """The primitive actions that reach ``condition``, read from the rules.

    An item: the actions of the rules that give it (collect, make) or place it. An achievement: the action of
    the rule that unlocks it. Achievements no rule covers (creatures, eating, waking up: a game's data may have no
    recipe for them) fall back, in order, to: the achievement itself when it is an action name; the actions the
    rules' facts quote in the sentence naming the achievement; the action the rules collect with (hitting a
    creature uses it too). Nothing else is assumed.
    """
    if condition.WhichOneof("kind") == "inventory":
        item = condition.inventory.item
        found = [w.action for w in ways_to_get(rules, item)] + [r.action for r in rules.place if r.item == item]
    else:
        achievement = condition.achievement
        rule = achievement_rule(rules, achievement)
        if rule is not None:
            found = [rule.action]
        elif achievement in actions:
            found = [achievement]
        else:
            named = re.compile(rf"\b{re.escape(achievement)}\b")
            found = [a for fact in rules.facts if named.search(fact) for a in _QUOTED.findall(fact) if a in actions]
    if not found and (interact := _interact_action(rules)):
        found = [interact]
    return [a for a in dict.fromkeys(found) if a in actions]


def complete_action_space(config: learner_pb2.RLConfig, describe: env_pb2.DescribeResponse) -> list[str]:
    """Adds the primitive actions without which the config's own success condition cannot be reached.

    Weak models leave out the one action a sub-task needs (``make_wood_pickaxe`` without the
    ``make_wood_pickaxe`` action) or every move; training such a space wastes its whole budget. Each success
    condition gets the actions :func:`actions_for` reads from the rules; the agent must be able to move (the
    actions Describe's ``action_roles`` says move). Returns what was added.
    """
    if not config.primitive_actions:
        return []  # empty means all actions
    actions = list(describe.actions)
    needed: list[str] = [a for a in describe.action_roles.move if a in actions]
    for condition in config.task.success:
        needed += actions_for(condition, describe.rules, actions)
    added = [a for a in dict.fromkeys(needed) if a in actions and a not in config.primitive_actions]
    config.primitive_actions.extend(added)
    return added


SUCCESS_REWARD = 10.0
"""The weight of the success term a config gets when its own reward never pays its sub-task's success (and pure
RL's)."""


def _pays_success(term: common_pb2.RewardTerm, conditions: list[common_pb2.Condition]) -> bool:
    """Whether a term pays (positively) for reaching one of the conditions."""
    if term.weight <= 0:
        return False
    achievements = {c.achievement for c in conditions if c.WhichOneof("kind") == "achievement"}
    items = {c.inventory.item for c in conditions if c.WhichOneof("kind") == "inventory"}
    return (term.kind == "success"
            or (term.kind == "achievement" and (term.target == "*" or term.target in achievements))
            or (term.kind == "inventory_gain" and (term.target == "*" or term.target in items))
            or (term.kind == "native" and bool(achievements)))  # the game's own reward pays achievements


def complete_reward(config: learner_pb2.RLConfig) -> str:
    """Drops terms of weight 0 (they pay nothing) and adds a success term when no term pays the sub-task's
    success: RL cannot learn what it is never paid for. Embedded Gemma 3 270M answered make_wood_pickaxe with
    health at weight 0 and death at -1 only; its training stayed near chance. Returns what was done ('' for
    nothing)."""
    kept = [t for t in config.reward_terms if t.weight != 0]
    done = [f"dropped {len(config.reward_terms) - len(kept)} term(s) of weight 0"] if len(kept) < len(
        config.reward_terms) else []
    if not any(_pays_success(t, list(config.task.success)) for t in kept):
        kept.append(common_pb2.RewardTerm(kind="success", weight=SUCCESS_REWARD))
        done.append(f"added success (weight {SUCCESS_REWARD:g}): no term paid the sub-task's success")
    del config.reward_terms[:]
    config.reward_terms.extend(kept)
    return "; ".join(done)

