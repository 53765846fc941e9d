"""Skill programs: the fast agent's second answer format, for small models.

A program is a short JSON list of steps over a few generic ops (collect an item, place an item, make an item, go
to a material, repeat an action until a condition holds, repeat earlier steps). Every argument is a name from
the env's ``Describe`` (its rules, items, materials, actions, achievements), typed as an enum in the answer's
JSON schema, so a server with constrained decoding can only write real names. No op solves a task of its own:
``collect`` works for any item the rules let the player collect, ``make`` for any item they let it make.

The planner checks a program here (:func:`check_program`: what the schema cannot say, each problem naming its
step and what to change) and compiles it into an ordinary Python generator skill
(:mod:`services.planner.program_code`), which is registered, sandboxed, tested and kept like any other skill.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from rlgpt.v1 import common_pb2, env_pb2
from services.planner.action_space import actions_for
from services.planner.schemas import clamped, item_count, one_of

MAX_PROGRAM_STEPS = 8
"""Most steps a program may have (a longer answer is refused by the schema)."""
MAX_TIMES = 200
"""Most times an ``act`` step repeats its action, and most times a ``repeat`` step repeats."""
MAX_EXPANDED_STEPS = 200
"""Most steps a program runs once its ``repeat`` steps are unrolled."""
IDLE_LIMIT = 4
"""Frames in a row an ``act`` step without a condition may change nothing before it ends (a dead loop)."""
FORBID_EXTRA = ConfigDict(extra="forbid")
MAX_REPEATS = 9
"""Most times a ``repeat`` step runs its steps again."""
REPEATS = clamped(int, 1, MAX_REPEATS)
"""A repeat count: a small model's out-of-range number is corrected, not fatal (so is an item count, up to the
env's stack limit)."""
TIMES = clamped(int, 1, MAX_TIMES)
LAST = clamped(int, 1, MAX_PROGRAM_STEPS)


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """The names a program's arguments may take, read from ``Describe`` (in its order)."""

    collect: tuple[str, ...]
    """Inventory items a collect rule gives."""
    place: tuple[str, ...]
    """Items a place rule places."""
    make: tuple[str, ...]
    """Items a make rule makes."""
    materials: tuple[str, ...]
    actions: tuple[str, ...]
    achievements: tuple[str, ...]
    items: tuple[str, ...]
    stack_limit: int
    """Most of one item a count may ask for (Describe's stack_limit)."""

    @classmethod
    def of(cls, describe: env_pb2.DescribeResponse) -> Vocabulary:
        rules = describe.rules
        received = {c.item for rule in rules.collect for c in rule.receives}
        made = {r.item for r in rules.make}
        return cls(collect=tuple(i for i in describe.items if i in received),
                   place=tuple(dict.fromkeys(r.item for r in rules.place)),
                   make=tuple(i for i in describe.items if i in made), materials=tuple(rules.materials),
                   actions=tuple(describe.actions), achievements=tuple(describe.achievements),
                   items=tuple(describe.items), stack_limit=describe.stack_limit)


    def narrowed(self, rules: common_pb2.WorldRules, conditions: list[common_pb2.Condition],
                 actions: list[str]) -> Vocabulary:
        """The names a program for a sub-task with ``conditions`` may use: those of its prerequisites by the rules
        (what it needs, transitively: the items, the materials they come from or are placed as, the actions and
        achievements of those rules). A small model can then only write steps about its sub-task; the order,
        counts and steps stay its own. A sub-task no rule covers (a creature, sleeping) keeps every name."""
        from services.planner.plan_rules import ACHIEVEMENT, ITEM, PLACED, prerequisite_closure

        closure = prerequisite_closure(rules, conditions)
        items = {name for kind, name in closure if kind == ITEM}
        placed = {name for kind, name in closure if kind == PLACED}
        sources = [r for r in rules.collect if any(c.item in items for c in r.receives)]
        makes = [r for r in rules.make if r.item in items]
        places = [r for r in rules.place if r.item in placed]
        if not (sources or makes or places):
            return self
        rule_actions = {r.action for r in (*sources, *makes, *places)}
        rule_actions |= {a for c in conditions for a in actions_for(c, rules, actions)}
        achievements = {name for kind, name in closure if kind == ACHIEVEMENT}
        achievements |= {a for r in sources for a in r.achievements} | {r.achievement for r in (*makes, *places)}
        materials = {r.material for r in sources} | placed

        def kept(names: tuple[str, ...], wanted: set[str]) -> tuple[str, ...]:
            return tuple(n for n in names if n in wanted)

        # Describe's order everywhere: typing.Literal caches by the set of values, so two enums of one set must
        # not differ in order (a schema would get the other's).
        return Vocabulary(
            collect=kept(self.collect, items), place=kept(self.place, placed), make=kept(self.make, items),
            materials=kept(self.materials, materials) or self.materials,
            actions=kept(self.actions, rule_actions) or self.actions,
            achievements=kept(self.achievements, achievements) or self.achievements,
            items=kept(self.items, items) or self.items, stack_limit=self.stack_limit)


PROGRAM_API_METHODS = ("step_to", "nearest", "facing_cell", "look", "face", "needs", "can", "missing",
                       "inventory", "achievements", "view", "position")
"""The agent attributes compiled programs use; a backend whose skill API documents them all can run programs."""


def programs_supported(describe: env_pb2.DescribeResponse) -> bool:
    """Whether programs compile for this env: its rules say how items are got, and the skill API it documents
    has every attribute the compiled code uses (MineDojo's does not: it has no map memory or routes)."""
    vocabulary = Vocabulary.of(describe)
    documented = all(f"agent.{name}" in describe.skill_api for name in PROGRAM_API_METHODS)
    return documented and bool(vocabulary.collect) and bool(vocabulary.materials)


@lru_cache(maxsize=16)
def program_schema(vocabulary: Vocabulary) -> type[BaseModel]:
    """The answer's pydantic model: ``{name, description, steps: [step]}``, each step one op (its ``op`` picks
    which), every name an enum of ``vocabulary``. An op with nothing to name (no make rules) is left out."""
    ops: list[Any] = []

    def op(name: str, doc: str, **fields: Any) -> None:
        # An argument the op does not have is refused (named in the error), not silently dropped.
        model = create_model(f"{name.title().replace('_', '')}Step", __doc__=doc, __config__=FORBID_EXTRA,
                             op=(Literal[name], ...), **fields)  # type: ignore[call-overload]
        ops.append(model)

    if vocabulary.collect:
        op("collect", "Walk to the nearest material that gives the item and use the rules' action on it until "
                      "`count` more of it are in the inventory.",
           item=(one_of("CollectItem", vocabulary.collect), ...), count=item_count(vocabulary.stack_limit, 1))
    if vocabulary.place:
        op("place", "Place the item into a faced cell the rules allow.",
           item=(one_of("PlaceItem", vocabulary.place), ...))
    if vocabulary.make:
        op("make", "Make the item once, next to what the rules need nearby.",
           item=(one_of("MakeItem", vocabulary.make), ...))
    op("go_to", "Walk next to the nearest cell of the material and face it.",
       target=(one_of("Material", vocabulary.materials), ...))
    condition = create_model(
        "Until", achievement=(one_of("Achievement", vocabulary.achievements) | None, None),
        item=(one_of("Item", vocabulary.items) | None, None), count=item_count(vocabulary.stack_limit, None))
    op("act", "Do the action until `until` holds, at most `times` times (without `until`: `times` times, or until it "
              f"has made no progress for {IDLE_LIMIT} frames in a row).",
       action=(one_of("Action", vocabulary.actions), ...), times=(TIMES, Field(1, ge=1, le=MAX_TIMES)),
       until=(condition | None, None))
    op("repeat", "Run the `last` steps before this one `times` more times.",
       last=(LAST, Field(1, ge=1, le=MAX_PROGRAM_STEPS)), times=(REPEATS, Field(1, ge=1, le=MAX_REPEATS)))
    step = Annotated[Union[tuple(ops)], Field(discriminator="op")]  # noqa: UP007 (a runtime tuple of models)
    # Steps only: the skill is named after its sub-task, and every token a small model need not write is one it
    # cannot get wrong (and one less at ~3 tokens/s under a grammar on 2 cores).
    return create_model(
        "SkillProgram", __doc__="A skill as a program: steps run in order; the skill ends after the last.",
        steps=(list[step], Field(min_length=1, max_length=MAX_PROGRAM_STEPS)))


def program_steps(answer: BaseModel) -> list[dict[str, Any]]:
    """The answer's steps (its ``steps``, or a one-agent sub-task's ``program``) as plain dicts. ``until`` is left
    out when it names nothing and keeps the item count when it names both an achievement and an item; a ``repeat``
    of more steps than come before it repeats those there are, one with none before it is dropped, and one that
    would run the program past :data:`MAX_EXPANDED_STEPS` runs as many times as fit (or is dropped): a small
    model's slips are corrected, not fatal."""
    steps: list[dict[str, Any]] = []
    sizes: list[int] = []  # steps each one runs, its repeats unrolled
    given = answer.steps if hasattr(answer, "steps") else answer.program  # type: ignore[attr-defined]
    for step in given:
        data = step.model_dump()
        until = {k: v for k, v in (data.pop("until", None) or {}).items() if v is not None}
        if until.get("item"):  # an item count is the more exact of two conditions a small model wrote at once
            data["until"] = {"item": until["item"], "count": until.get("count") or 1}
        elif until.get("achievement"):
            data["until"] = {"achievement": until["achievement"]}
        size = 1
        if data["op"] == "repeat":
            if not steps:
                continue
            data["last"] = min(data["last"], len(steps))
            body = sum(sizes[len(steps) - data["last"]:])
            # "repeat the last 5 steps 9 times" past the limit: as many times as fit, or none.
            data["times"] = min(data["times"], (MAX_EXPANDED_STEPS - sum(sizes)) // body)
            if data["times"] < 1:
                continue
            size = body * data["times"]
        sizes.append(size)
        steps.append(data)
    return steps


def step_text(step: dict[str, Any]) -> str:
    """A step in words, as errors and comments name it ("collect wood 2", "act do until collect_drink")."""
    op = step["op"]
    if op == "collect":
        return f"collect {step['item']} {step.get('count', 1)}"
    if op in ("place", "make"):
        return f"{op} {step['item']}"
    if op == "go_to":
        return f"go_to {step['target']}"
    if op == "repeat":
        return f"repeat the last {step['last']} steps {step['times']} more times"
    until = step.get("until")
    return f"act {step['action']} " + (f"until {condition_text(until)}" if until else f"{step['times']} times")


def condition_text(until: dict[str, Any]) -> str:
    if until.get("achievement"):
        return until["achievement"]
    return f"{until.get('count') or 1} {until.get('item')}"


class ProgramError(ValueError):
    """A program that cannot work whatever the world; the message names the step and what to change."""


def check_program(steps: list[dict[str, Any]], rules: common_pb2.WorldRules, actions: list[str]) -> None:
    """What the schema cannot check: raises :class:`ProgramError` naming the first bad step."""
    if not steps:
        raise ProgramError("the program has no steps: write at least one step")
    limits = {i.item: i.max for i in rules.items}
    expanded = 0
    sizes: list[int] = []
    for n, step in enumerate(steps, 1):
        where = f"step {n} ({step_text(step)})"
        op = step["op"]
        if op == "collect" and step.get("count", 1) > limits.get(step["item"], step.get("count", 1)):
            raise ProgramError(f"{where}: the inventory holds at most {limits[step['item']]} {step['item']}; "
                               f"ask for at most that many")
        if op == "act":
            until = step.get("until")
            if until:
                _check_until(where, step["action"], until, rules, actions)
        if op == "repeat":
            if step["last"] > n - 1:
                raise ProgramError(f"{where}: only {n - 1} steps come before it; repeat at most that many")
            size = sum(sizes[n - 1 - step["last"]:]) * step["times"]
        else:
            size = 1
        sizes.append(size)
        expanded += size
        if expanded > MAX_EXPANDED_STEPS:
            raise ProgramError(f"{where}: with its repeats the program runs more than {MAX_EXPANDED_STEPS} steps; "
                               "repeat fewer steps or fewer times")


def _check_until(where: str, action: str, until: dict[str, Any], rules: common_pb2.WorldRules,
                 actions: list[str]) -> None:
    if bool(until.get("achievement")) == bool(until.get("item")):
        raise ProgramError(f"{where}: `until` names exactly one of `achievement` or `item` (with `count`)")
    if until.get("achievement"):
        condition = common_pb2.Condition(achievement=until["achievement"])
    else:
        condition = common_pb2.Condition(inventory=common_pb2.ItemCount(item=until["item"],
                                                                        count=until.get("count") or 1))
    ways = actions_for(condition, rules, actions)
    if ways and action not in ways:
        raise ProgramError(f"{where}: doing {action} never gets {condition_text(until)}; by the rules it comes from "
                           f"{' or '.join(ways)}: use that action (after a go_to step where it needs a material)")
