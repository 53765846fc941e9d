"""A whole-game curriculum repaired from the world's rules.

A game task has no one goal to repair a plan toward: its plan is a curriculum of achievements. A small model's
curriculum often names achievements whose prerequisites it skips, repeats one step a dozen times, or pairs a name
with a condition it does not mean (``collect_wood`` with "1 coal"). :func:`repair_curriculum` keeps what the agent
chose, the achievements it aimed at (in its conditions or as a sub-task's name) in its order, and builds each
one's chain from the rules (:func:`services.planner.plan_rules.repair_plan`, one goal at a time; an aim another
aim's chain unlocks on its way is reached there). An achievement's step already in the curriculum is not
repeated: in one world it is already unlocked and adds nothing; items are used up, so a later chain collects
what it uses again. Every fact comes from the rules message.
"""

from __future__ import annotations

import logging
import re

from rlgpt.prompts import conditions_text
from rlgpt.v1 import common_pb2, planner_pb2
from rlgpt.world_rules import achievement_items
from services.planner.plan_rules import repair_plan
from services.planner.schemas import MAX_SUBTASKS

log = logging.getLogger(__name__)

MAX_CURRICULUM = 2 * MAX_SUBTASKS
"""The most sub-tasks a repaired curriculum holds: the agent's own limit, plus as many steps its chains may need."""

PLACEHOLDER = re.compile(r"\s*<[^<>]*>\s*")
"""An answer form's placeholder ("<what to do, one sentence>"), which small models copy: it says nothing."""


def aimed_at(plan: planner_pb2.Plan, achievements: set[str]) -> list[str]:
    """The achievements the plan aims at, in its order, each once: those its conditions name and the sub-tasks'
    names that are achievements."""
    aims: list[str] = []
    for st in plan.subtasks:
        for name in [*_named(st), st.name]:
            if name in achievements and name not in aims:
                aims.append(name)
    return aims


def _goal(aim: str) -> common_pb2.TaskSpec:
    return common_pb2.TaskSpec(name=aim, description=f"Unlock the achievement {aim}.",
                               success=[common_pb2.Condition(achievement=aim)])


def _unlocks(rules: common_pb2.WorldRules, st: planner_pb2.SubTask, aim: str) -> bool:
    """Whether reaching the sub-task's conditions unlocks ``aim``: it names it, or holds what unlocking it gives
    (3 wood: collect_wood)."""
    gives = achievement_items(rules, aim)
    return any(c.achievement == aim or (c.WhichOneof("kind") == "inventory" and c.inventory.count >= gives.get(
        c.inventory.item, 10**9)) for c in st.success)


def _named(st: planner_pb2.SubTask) -> list[str]:
    return [c.achievement for c in st.success if c.WhichOneof("kind") == "achievement"]


def _name_of(st: planner_pb2.SubTask) -> str:
    """A name that says the sub-task's conditions ("get_3_wood", "place_table")."""
    parts = [c.achievement if c.WhichOneof("kind") == "achievement" else
             f"get_{c.inventory.count}_{c.inventory.item}" for c in st.success]
    return "_and_".join(parts)[:48].rstrip("_") or "step"


def _achievements_only(st: planner_pb2.SubTask) -> bool:
    return all(c.WhichOneof("kind") == "achievement" for c in st.success)


def _key(st: planner_pb2.SubTask) -> bytes:
    return b"".join(sorted(c.SerializeToString(deterministic=True) for c in st.success))


def repair_curriculum(plan: planner_pb2.Plan, rules: common_pb2.WorldRules, achievements: set[str],
                      items: set[str], allowed_needs: set[str] | frozenset[str] = frozenset(),
                      limit: int = MAX_CURRICULUM) -> planner_pb2.Plan:
    """The rules' chain toward each achievement the plan aims at, in the plan's order, each achievement once; an aim
    whose chain would take the curriculum past ``limit`` sub-tasks is left out (the rationale says which). The
    model's sub-tasks with a step's conditions are kept as :func:`repair_plan` keeps them (a placeholder
    description replaced by the conditions in words, a name that is another achievement by one that says its
    conditions); a sub-task the rules add is coded and described from its rule. A plan that aims at no achievement
    is returned as it is (nothing to repair toward). Deterministic."""
    aims = aimed_at(plan, achievements)
    if not aims:
        return plan
    chains = {aim: list(repair_plan(plan, _goal(aim), rules, items, allowed_needs).subtasks) for aim in aims}
    # An aim another aim's chain unlocks on its way is reached there, with the amounts that chain needs.
    on_the_way = [aim for aim in aims
                  if any(_unlocks(rules, st, aim) for other in aims if other != aim for st in chains[other])]
    repaired = planner_pb2.Plan(iteration=plan.iteration)
    seen: set[bytes] = set()
    left_out = []
    for aim in aims:
        if aim in on_the_way:
            continue
        # An achievement is unlocked once in a world: its step again adds nothing. Items are used up: a later
        # chain gets what it uses again.
        steps = [st for st in chains[aim] if _key(st) not in seen or not _achievements_only(st)]
        if len(repaired.subtasks) + len(steps) > limit:
            left_out.append(aim)
            continue
        for st in steps:
            seen.add(_key(st))
            copy = repaired.subtasks.add()
            copy.CopyFrom(st)
            if not copy.description or PLACEHOLDER.fullmatch(copy.description):
                copy.description = f"Reach {conditions_text(list(copy.success))}."
            if copy.name in achievements and copy.name not in _named(copy):  # a name that says another aim
                copy.name = _name_of(copy)
            while sum(s.name == copy.name for s in repaired.subtasks) > 1:
                copy.name += "_2"
    names = [st.name for st in repaired.subtasks]
    over = f"; left out (over {limit} sub-tasks): {', '.join(left_out)}" if left_out else ""
    way = f"; reached on another aim's way: {', '.join(on_the_way)}" if on_the_way else ""
    before = " -> ".join(st.name for st in plan.subtasks)
    rationale = "" if PLACEHOLDER.fullmatch(plan.rationale) else plan.rationale
    repaired.rationale = (f"{rationale} | curriculum repaired from the rules toward the achievements the plan "
                          f"aimed at ({', '.join(aims)}), each step once: was {before}; now "
                          f"{' -> '.join(names)}{way}{over}").strip(" |")
    log.info("curriculum repaired from the rules: %s", " -> ".join(names))
    return repaired


def curriculum_violations(plan: planner_pb2.Plan, achievements: set[str]) -> list[str]:
    """What a game's curriculum gets wrong besides the rules' order and amounts, one plain sentence each: an
    achievement a sub-task aims at again (in one world it is unlocked once: the second adds nothing), and a sub-task
    named after an achievement whose conditions do not name it (what it is for and what is checked disagree)."""
    found, first = [], {}
    for i, st in enumerate(plan.subtasks, 1):
        named = _named(st)
        for name in named:
            if name in first:
                found.append(f"sub-task {i} ({st.name}) aims again at achievement {name}, which sub-task "
                             f"{first[name]} already unlocks; in one episode it counts once: aim at another "
                             "achievement or remove it")
            first.setdefault(name, i)
        if st.name in achievements and st.name not in named:
            found.append(f"sub-task {i} is named after achievement {st.name} but its success conditions do not name "
                         f"it: give it the condition {{\"achievement\": \"{st.name}\"}} or another name")
    return found

