"""Plans checked against the world's rules (``rlgpt.v1.WorldRules``), and plans repaired from them.

A small model's plan often skips a prerequisite, orders the chain wrongly, collects too few items or wanders into
side quests: :func:`plan_violations` finds these by following the inventory along the chain, one plain sentence
each for the model to act on; :func:`repair_plan` builds the chain the rules imply. Every game fact comes from the
rules message. Tokens followed: an item in the inventory (``item``), a material the player placed in the world
(``placed``), an achievement (``achievement``). A sub-task's conditions leave what
:func:`services.planner.plans.implied_items` says; the items a rule uses are consumed by the sub-task whose
condition is that rule's achievement or item; tools held are not consumed; a place rule leaves its item as a
placed material that later ``nearby`` needs can use. A nearby material no place rule makes occurs in the world on
its own and is no prerequisite.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Iterable

from rlgpt.prompts import conditions_text
from rlgpt.v1 import common_pb2, planner_pb2
from rlgpt.world_rules import Requirement, achievement_items, achievement_rule, ways_to_get
from services.planner.game_task import is_game
from services.planner.plans import implied_items, task_subtask
from services.planner.state import Decision

log = logging.getLogger(__name__)

ITEM, PLACED, ACHIEVEMENT = "item", "placed", "achievement"
Token = tuple[str, str]
Need = tuple[Counter[str], dict[str, int], tuple[str, ...]]  # items used up, items held, placed materials nearby


def needs_named(feedback: str, names: Iterable[str]) -> set[str]:
    """The names (achievements, items) the critic's feedback mentions: needs a plan may add, not side quests."""
    said = set(re.findall(r"[A-Za-z0-9_]+", feedback))
    return {name for name in names if name in said}


def goal_conditions(task: common_pb2.TaskSpec) -> list[common_pb2.Condition]:
    """The task's success conditions; its name as the achievement where none are spelled out. A game task has
    none (every achievement is its objective: no sub-task is a side quest, and every name stays offered)."""
    if is_game(task):
        return []
    return list(task.success) or ([common_pb2.Condition(achievement=task.name)] if task.name else [])


def _requirements(rules: common_pb2.WorldRules, token: Token) -> list[Requirement]:
    kind, name = token
    if kind == ITEM:
        return ways_to_get(rules, name)
    if kind == PLACED:
        return [Requirement(action=r.action, uses={c.item: c.count for c in r.uses}, holds={},
                            nearby=tuple(r.nearby), where=tuple(r.where)) for r in rules.place if r.item == name]
    rule = achievement_rule(rules, name)
    return [rule] if rule is not None else []


def _prerequisites(rules: common_pb2.WorldRules, req: Requirement | None) -> list[Token]:
    """The tokens ``req`` needs, in the rule's order: items used, items held, materials the player places."""
    placeable = {r.item for r in rules.place}
    return [] if req is None else [(ITEM, i) for i in req.uses] + [(ITEM, i) for i in req.holds if i not in req.uses] \
        + [(PLACED, m) for m in req.nearby if m in placeable]


class _Ranking:
    """The ways to get each token, fewest steps first (the rules' order among equals); a cycle costs infinity."""

    def __init__(self, rules: common_pb2.WorldRules):
        self.rules = rules
        self.costs: dict[Token, float] = {}

    def cost(self, token: Token, seen: frozenset[Token] = frozenset()) -> float:
        if token in self.costs or token in seen:
            return self.costs.get(token, math.inf)
        best = min((self._way_cost(r, seen | {token}) for r in _requirements(self.rules, token)), default=0.0)
        if best < math.inf:  # a cost found inside a cycle may be lower from elsewhere: only finite ones are kept
            self.costs[token] = best
        return best

    def _way_cost(self, req: Requirement, seen: frozenset[Token]) -> float:
        return 1 + sum(self.cost(t, seen) for t in _prerequisites(self.rules, req))

    def ways(self, token: Token) -> list[Requirement]:
        reqs = _requirements(self.rules, token)
        return sorted(reqs, key=lambda r: self._way_cost(r, frozenset({token})))


def _root(c: common_pb2.Condition) -> Token:
    return (ACHIEVEMENT, c.achievement) if c.WhichOneof("kind") == "achievement" else (ITEM, c.inventory.item)


def _provides(rules: common_pb2.WorldRules, c: common_pb2.Condition) -> set[Token]:
    """What holding ``c`` gives the chain: the achievement, the items it leaves, the material it places."""
    if c.WhichOneof("kind") == "inventory":
        return {(ITEM, c.inventory.item)}
    return ({(ACHIEVEMENT, c.achievement)} | {(ITEM, i) for i in achievement_items(rules, c.achievement)}
            | {(PLACED, r.item) for r in rules.place if r.achievement == c.achievement})


def _closure(rules: common_pb2.WorldRules, goal: list[common_pb2.Condition]) -> set[Token]:
    """Every token the goal needs by the rules, any way of getting each (alternatives are no side quests)."""
    todo = [t for c in goal for t in sorted(_provides(rules, c))]
    found: set[Token] = set()
    while todo:
        token = todo.pop()
        if token not in found:
            found.add(token)
            todo.extend(t for r in _requirements(rules, token) for t in _prerequisites(rules, r))
    return found


def _needs(rules: common_pb2.WorldRules, ranking: _Ranking, c: common_pb2.Condition,
           have: Counter[str]) -> list[Need]:
    """The ways ``c`` can be met from ``have``, best first: an achievement applies its rule once, an inventory
    condition repeats its way until the count is reached."""
    placeable = {r.item for r in rules.place}
    missing = 1 if c.WhichOneof("kind") == "achievement" else c.inventory.count - have[c.inventory.item]
    reqs = ranking.ways(_root(c)) if missing > 0 else []
    return [(Counter({i: n * math.ceil(missing / max(r.gives, 1)) for i, n in r.uses.items()}), dict(r.holds),
             tuple(m for m in r.nearby if m in placeable)) for r in reqs] or [(Counter(), {}, ())]


def _unmet(need: Need, have: Counter[str], placed: set[str]) -> bool:
    uses, holds, nearby = need
    return any(have[i] < n for i, n in [*uses.items(), *holds.items()]) or any(m not in placed for m in nearby)


def _sentence(plan: planner_pb2.Plan, rules: common_pb2.WorldRules, i: int, token: Token, what: str, had: int,
              n: int, later: int | None) -> str:
    """One missing prerequisite of sub-task ``i`` in words: what it needs, what it has, what to do."""
    where, (kind, name) = f"sub-task {i + 1} ({plan.subtasks[i].name})", token
    if later is not None:
        return (f"{where} needs {what}, which is {'got' if kind == ITEM else 'placed'} by sub-task {later + 1} "
                f"({plan.subtasks[later].name}), which comes after it: move it before sub-task {i + 1}")
    if kind == PLACED:
        how = "".join(f" ({r.achievement})" for r in rules.place if r.item == name and r.achievement)
        return (f"{where} needs {what} but no sub-task before it places one: add a sub-task that places a "
                f"{name}{how} before it")
    if had:
        return f"{where} needs {what} but the sub-tasks before it leave {had}: get {n - had} more {name} before it"
    return f"{where} needs {what} but the sub-tasks before it leave 0: add a sub-task that gets {name} before it"


def _place_uses(rules: common_pb2.WorldRules, material: str) -> Counter[str] | None:
    """What placing ``material`` uses up (None when no rule places it)."""
    for r in rules.place:
        if r.item == material:
            return Counter({c.item: c.count for c in r.uses})
    return None


def plan_violations(plan: planner_pb2.Plan, task: common_pb2.TaskSpec, rules: common_pb2.WorldRules,
                    items: set[str], allowed_needs: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Where ``plan`` breaks the rules, one sentence each (missing prerequisite, wrong order, side quest).

    A side quest (no condition of it in what the goal needs, and not a survival need the critic asked for:
    ``allowed_needs``) is reported alone and left out of the inventory followed, as if removed. Within a sub-task
    a condition whose needs are met goes first (its conditions may provide for each other), and a sub-task that
    holds what placing a needed material uses may place it itself (a "place the table and make the pickaxe" step).
    """
    goal, ranking = goal_conditions(task), _Ranking(rules)
    if not (rules.collect or rules.place or rules.make):
        return []  # no rules served (a backend without them): nothing to check against
    needed = _closure(rules, goal)
    side = [bool(goal) and not any(_root(c)[1] in allowed_needs for c in st.success)
            and not any(_provides(rules, c) & needed for c in st.success) for st in plan.subtasks]
    providers = [set().union(*(_provides(rules, c) for c in st.success)) if not side[j] else set()
                 for j, st in enumerate(plan.subtasks)]
    have: Counter[str] = Counter({c.item: c.count for c in task.start_inventory})
    placed: set[str] = set()
    found: list[str] = []
    for i, st in enumerate(plan.subtasks):
        if side[i]:
            found.append(f"sub-task {i + 1} ({st.name}) does not help reach the task's goal "
                         f"({conditions_text(goal)}) by the game's rules: remove it")
            continue
        pending, later = list(st.success), {t: j for j in range(len(plan.subtasks) - 1, i, -1) for t in providers[j]}
        while pending:
            options = [(c, _needs(rules, ranking, c, have)) for c in pending]
            c, ways = next(((c, w) for c, w in options if any(not _unmet(n, have, placed) for n in w)), options[0])
            pending.remove(c)
            uses, holds, nearby = next((n for n in ways if not _unmet(n, have, placed)), ways[0])
            short = [((ITEM, k), f"{n} {k}", n) for k, n in uses.items()] + [
                ((ITEM, k), f"to hold {n} {k} (a tool, not used up)", n) for k, n in holds.items() if k not in uses]
            found += [_sentence(plan, rules, i, token, what, have[token[1]], n, later.get(token))
                      for token, what, n in short if have[token[1]] < n]
            for m in nearby:
                if m in placed:
                    continue
                place = _place_uses(rules, m)
                if place is not None and all(have[k] - uses[k] >= n for k, n in place.items()):
                    uses = uses + place  # it places one itself with what it holds (a merged place-and-make step)
                    placed.add(m)
                else:
                    found.append(_sentence(plan, rules, i, (PLACED, m), f"a {m} nearby", 0, 1, later.get((PLACED, m))))
            have = Counter({k: max(v - uses[k], 0) for k, v in have.items()})  # used up, then what it leaves
            have |= Counter(implied_items([c], rules, items))
            placed |= {t[1] for t in _provides(rules, c) if t[0] == PLACED}
    return found


def _chain(rules: common_pb2.WorldRules, ranking: _Ranking,
           roots: list[Token]) -> tuple[list[Token], dict[Token, Requirement | None]]:
    """The tokens the roots need, depth first, prerequisites before what needs them; each with its best way."""
    order: list[Token] = []
    chosen: dict[Token, Requirement | None] = {}

    def visit(token: Token) -> None:
        if token in chosen:
            return
        chosen[token] = next(iter(ranking.ways(token)), None)
        for t in _prerequisites(rules, chosen[token]):
            visit(t)
        order.append(token)

    for root in roots:
        visit(root)
    return order, chosen


def _amounts(rules: common_pb2.WorldRules, order: list[Token], chosen: dict[Token, Requirement | None],
             levels: dict[Token, int], start: Counter[str]) -> tuple[dict[Token, int], set[Token]]:
    """How much of each token the chain gets (an item: the inventory level it needs, what the later steps use up
    plus the tools they hold; else 1), 0 where the start inventory already has it; and the tokens a step needs
    (not only the roots, whose ``levels`` their own sub-tasks reach)."""
    used: Counter[Token] = Counter()
    held: dict[Token, int] = {}
    amounts: dict[Token, int] = {}
    for token in reversed(order):  # what needs a token comes before it
        req = chosen[token]
        if token[0] == ITEM:
            amount = used[token] + max(held.get(token, 0), levels.get(token, 0))
            missing = amount - start[token[1]]
            applied = math.ceil(missing / max(req.gives, 1)) if missing > 0 and req is not None else 0
        else:
            amount = applied = 1 if token in levels or used[token] else 0
        amounts[token] = amount if applied else 0
        if applied and req is not None:
            for item, n in req.uses.items():
                used[(ITEM, item)] += n * applied
            for item, n in req.holds.items():
                held[(ITEM, item)] = max(held.get((ITEM, item), 0), n)
            used.update(t for t in _prerequisites(rules, req) if t[0] == PLACED)
    return amounts, {t for t, n in used.items() if n} | {t for t, n in held.items() if n}


def _step(rules: common_pb2.WorldRules, token: Token, req: Requirement, amount: int,
          start: Counter[str]) -> planner_pb2.SubTask | None:
    """A new (coded) sub-task for one step of the chain, named and described from its rule; None where no
    condition can say it (a place rule without an achievement)."""
    kind, name = token
    uses = ", ".join(f"{n} {i}" for i, n in req.uses.items()) or "nothing"
    near = f" with {' and '.join(req.nearby)} nearby" if req.nearby else ""
    holding = f" while holding {', '.join(f'{n} {i}' for i, n in req.holds.items())}" if req.holds else ""
    make = next((r for r in rules.make if r.item == name and r.action == req.action), None)
    if kind == PLACED:
        title = next(r.achievement for r in rules.place if r.item == name)
        text = f"Place a {name} ({req.action}), which uses {uses}{near}."
    elif make is not None and make.achievement and amount <= req.gives and not start[name]:
        title, text = make.achievement, f"Make {req.gives} {name} ({req.action}), which uses {uses}{near}."
    else:
        how = f"{req.action}, which uses {uses}{near} each time" if make is not None else \
            f"{req.action} on {' or '.join(req.where)}{holding}"
        success = common_pb2.Condition(inventory=common_pb2.ItemCount(item=name, count=amount))
        return planner_pb2.SubTask(name=f"get_{amount}_{name}"[:48].rstrip("_"), success=[success],
                                   description=f"Get {amount} {name} into the inventory: {how}.",
                                   decision=planner_pb2.DECISION_CODE)
    return planner_pb2.SubTask(name=title, description=text, success=[common_pb2.Condition(achievement=title)],
                               decision=planner_pb2.DECISION_CODE) if title else None


def _keys(conditions: Iterable[common_pb2.Condition]) -> list[bytes]:
    return [c.SerializeToString(deterministic=True) for c in conditions]


def repair_plan(plan: planner_pb2.Plan, task: common_pb2.TaskSpec, rules: common_pb2.WorldRules, items: set[str],
                allowed_needs: set[str] | frozenset[str] = frozenset()) -> planner_pb2.Plan:
    """The chain the rules imply for the task's goal: one sub-task per step (collect an item to the count the
    chain uses up, place, make; tools once), depth first, prerequisites before what needs them, ending in the
    goal. The model's sub-tasks with a step's condition are kept (name, description, decision, skills), as are its
    survival needs (``allowed_needs``) where it put them; a new sub-task is coded. Deterministic."""
    goal, model = goal_conditions(task), list(plan.subtasks)
    needed = _closure(rules, goal)
    at_end = next((k for k, st in enumerate(model) if set(_keys(goal)) <= set(_keys(st.success))), None)
    ending = model[at_end] if at_end is not None else task_subtask(task, Decision.CODE)
    survival = [k for k, st in enumerate(model) if k != at_end and any(_root(c)[1] in allowed_needs for c in st.success)
                and not any(_provides(rules, c) & needed for c in st.success)]
    roots = [c for st in [*(model[k] for k in survival), ending] for c in st.success]
    levels = {_root(c): c.inventory.count if c.WhichOneof("kind") == "inventory" else 1 for c in roots}
    start: Counter[str] = Counter({c.item: c.count for c in task.start_inventory})
    order, chosen = _chain(rules, _Ranking(rules), [_root(c) for c in roots])
    amounts, demanded = _amounts(rules, order, chosen, levels, start)
    chain: list[tuple[planner_pb2.SubTask, int | None, Token | None]] = []  # sub-task, its index in model, step
    for token in order:
        req = chosen[token]
        if req is None or not amounts[token] or (token in levels and token not in demanded) \
                or (token[0] == ITEM and token[1] not in items):  # what no inventory condition can name
            continue
        if (step := _step(rules, token, req, amounts[token], start)) is not None:
            mine = next((k for k, st in enumerate(model) if _keys(st.success) == _keys(step.success)), None)
            chain.append((model[mine] if mine is not None else step, mine, token))
    for k in survival:  # before the next of the model's sub-tasks kept, after the steps it needs
        own, _ = _chain(rules, _Ranking(rules), [_root(c) for c in model[k].success])
        at = next((n for n, (_, mine, _) in enumerate(chain) if mine is not None and mine > k), len(chain))
        at = max([at] + [n + 1 for n, (_, _, token) in enumerate(chain) if token in own])
        chain.insert(at, (model[k], k, None))
    repaired = planner_pb2.Plan(iteration=plan.iteration)
    for st in [st for st, _, _ in chain] + [ending]:
        copy = repaired.subtasks.add()
        copy.CopyFrom(st)
        while sum(s.name == copy.name for s in repaired.subtasks) > 1:
            copy.name += "_2"
    names = [st.name for st in repaired.subtasks]
    removed = [st.name for st in model if st.name not in names]
    added = [n for n in names if n not in {st.name for st in model}]
    repaired.rationale = (f"{plan.rationale} | repaired from the rules: removed {', '.join(removed) or 'nothing'}; "
                          f"added {', '.join(added) or 'nothing'}; the chain is {' -> '.join(names)}").strip(" |")
    log.info("plan repaired from the rules: %s", " -> ".join(names))
    return repaired


prerequisite_closure = _closure
"""Every token (kind, name) a list of conditions needs by the rules, transitively (public name of :func:`_closure`)."""
