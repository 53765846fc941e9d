"""Compiles a checked skill program (:mod:`services.planner.programs`) into an ordinary Python generator skill.

The generated module is plain skill code under the env server's sandbox rules: top-level functions only, the
agent API only (``step_to``, ``nearest``, ``needs``, ``can``, ``missing``, ...). What the env's ``Describe`` says
(which material gives an item and with which action, what a placement or a recipe needs, the idle action, the stack
limit) is written into the code as literals at compile time, so the code reads on its own and names no game's
action. A step that cannot go on raises ValueError with a message
that names the program's step and what to change; the first line keeps the program, so a revision can show it.
"""

from __future__ import annotations

import json
from typing import Any

from rlgpt.v1 import common_pb2, env_pb2
from services.planner.programs import IDLE_LIMIT, step_text

PROGRAM_HEADER = "# skill program: "
"""The first line of a compiled program: this prefix, then the program's steps as JSON."""
STEP_LIMIT = 400
"""Frames a place or make step may spend getting into position before it gives up with an error."""
PASSES = 20
"""Most passes over the steps: they run again until the sub-task's success condition holds."""

# The runtime every compiled program carries (sandboxed skill code: no names starting with "_", no imports).
RUNTIME = '''
def held(agent, needed):
    return all(agent.inventory.get(item, 0) >= count for item, count in needed.items())


def words(counts):
    return ", ".join(f"{count} {item}" for item, count in counts.items()) or "nothing"


def have(agent, names):
    return ", ".join(f"{agent.inventory.get(item, 0)} {item}" for item in names) or "nothing"


def nearest_of(agent, names):
    x, y = agent.position
    best = None
    for name in names:
        spot = agent.nearest(name)
        if spot is not None:
            distance = abs(spot[0] - x) + abs(spot[1] - y)
            if best is None or distance < best[0]:
                best = (distance, name)
    return names[0] if best is None else best[1]


def walk(agent, names):
    """One move toward the nearest remembered cell of names (exploring while none is known); None when facing one."""
    if agent.facing_cell() in names:
        return None
    return agent.step_to(nearest_of(agent, names)) or IDLE


def near(agent, distance):
    view = agent.view
    row, column = len(view) // 2, len(view[0]) // 2  # the player is at the view's centre
    return {view[row + dy][column + dx] for dy in range(-distance, distance + 1)
            for dx in range(-distance, distance + 1)
            if 0 <= row + dy < len(view) and 0 <= column + dx < len(view[row + dy])}


def go_to(agent, step, target):
    while True:
        move = walk(agent, [target])
        if move is None:
            return
        yield move


def collect(agent, step, item, count, sources, limit):
    """count more of item (up to the inventory's limit); sources: [material, action, tools held] for every rule
    that gives it."""
    target = min(agent.inventory.get(item, 0) + count, limit)
    while agent.inventory.get(item, 0) < target:
        usable = [source for source in sources if held(agent, source[2])]
        if not usable:
            tools = " or ".join(words(source[2]) for source in sources)
            raise ValueError(f"step {step} (collect {item} {count}): collecting {item} needs {tools} held and the "
                             f"inventory has none of that: add a step that makes or collects it before step {step}")
        facing = agent.facing_cell()
        action = None
        for material, act, tools in usable:
            if facing == material:
                action = act
        yield action if action is not None else walk(agent, [source[0] for source in usable])


def ready(agent, step, what, action, distance, placeable):
    """Moves that get the player where action works (next to what must be nearby, facing an allowed cell);
    returns when agent.can(action); raises naming the step when something only an earlier step can give is short."""
    for tries in range(STEP_LIMIT):
        if agent.can(action):
            return
        need = agent.needs(action)
        short = {item: count for item, count in list(need["uses"].items()) + list(need["holds"].items())
                 if agent.inventory.get(item, 0) < count}
        if short:
            raise ValueError(f"step {step} ({what}): needs {words(short)} and the inventory has "
                             f"{have(agent, short)}: add a collect or make step for it before step {step}")
        around = near(agent, distance)
        far = [name for name in need["nearby"] if name not in around]
        if far:
            if agent.nearest(far[0]) is None and far[0] in placeable:
                raise ValueError(f"step {step} ({what}): needs a {far[0]} nearby and none has been seen in this "
                                 f"world: add a place {far[0]} step before step {step}")
            yield walk(agent, [far[0]]) or IDLE
            continue
        faced = need["faced"]
        if faced and agent.facing_cell() not in faced:
            turn = None
            for direction in ("left", "right", "up", "down"):
                if turn is None and agent.look(direction) in faced:
                    turn = agent.face(direction)
            yield turn if turn is not None else (walk(agent, faced) or IDLE)
            continue
        raise ValueError(f"step {step} ({what}): {action} cannot work here: {'; '.join(agent.missing(action))}")
    raise ValueError(f"step {step} ({what}): not in a place where {action} works after {STEP_LIMIT} frames")


def place(agent, step, item, action, distance, placeable):
    yield from ready(agent, step, f"place {item}", action, distance, placeable)
    yield action


def make(agent, step, item, action, distance, placeable):
    before = agent.inventory.get(item, 0)
    yield from ready(agent, step, f"make {item}", action, distance, placeable)
    yield action
    if agent.inventory.get(item, 0) <= before:
        raise ValueError(f"step {step} (make {item}): {action} did not give {item}")


def finished(agent, success):
    return bool(success) and all(done(agent, condition) for condition in success)


def done(agent, until):
    if "achievement" in until:
        return until["achievement"] in agent.achievements
    return agent.inventory.get(until["item"], 0) >= until.get("count", 1)


def state_of(agent):
    """What counts as progress: the items the sub-task's success names, the achievements, the position."""
    return ([agent.inventory.get(c["item"], 0) for c in SUCCESS if "item" in c], tuple(agent.achievements),
            agent.position)


def act(agent, step, action, times, until):
    """action until the condition holds (at most times times); without one, times times, ending early once the
    action has made no progress (state_of) for IDLE_LIMIT frames in a row."""
    idle = 0
    for n in range(times):
        if until and done(agent, until):
            return
        before = state_of(agent)
        yield action
        idle = idle + 1 if state_of(agent) == before else 0
        if not until and idle >= IDLE_LIMIT:
            return
    if until and not done(agent, until):
        raise ValueError(f"step {step} (act {action}): after {times} times the condition {until} still does not "
                         f"hold: go_to the material the action works on first, or allow more times")
'''


def _literal(value: Any) -> str:
    """A Python literal of JSON-like data (dicts, lists, strings, numbers), stable."""
    return json.dumps(value, sort_keys=True)


def _sources(rules: common_pb2.WorldRules, item: str) -> list[list[Any]]:
    return [[rule.material, rule.action, {c.item: c.count for c in rule.requires}]
            for rule in rules.collect if any(c.item == item for c in rule.receives)]


def _action(rules: common_pb2.WorldRules, op: str, item: str) -> str:
    for rule in (rules.place if op == "place" else rules.make):
        if rule.item == item:
            return rule.action
    raise ValueError(f"no {op} rule for {item!r}")  # the schema's enums come from the same rules


def _call(step: dict[str, Any], n: int, describe: env_pb2.DescribeResponse, placeable: list[str]) -> str:
    rules = describe.rules
    op = step["op"]
    if op == "collect":
        limit = next((i.max for i in rules.items if i.item == step["item"] and i.max), describe.stack_limit)
        args = f"{_literal(step['item'])}, {step.get('count', 1)}, {_literal(_sources(rules, step['item']))}, {limit}"
        return f"yield from collect(agent, {n}, {args})"
    if op in ("place", "make"):
        action = _action(rules, op, step["item"])
        return (f"yield from {op}(agent, {n}, {_literal(step['item'])}, {_literal(action)}, "
                f"{max(1, rules.nearby_distance)}, {_literal(placeable)})")
    if op == "go_to":
        return f"yield from go_to(agent, {n}, {_literal(step['target'])})"
    if op == "act":
        return (f"yield from act(agent, {n}, {_literal(step['action'])}, {step.get('times', 1)}, "
                f"{_literal(step.get('until') or {})})")
    raise ValueError(f"op {op!r} is not a call")


def condition_literal(condition: common_pb2.Condition) -> dict[str, Any]:
    if condition.WhichOneof("kind") == "inventory":
        return {"item": condition.inventory.item, "count": condition.inventory.count or 1}
    return {"achievement": condition.achievement}


def compile_program(steps: list[dict[str, Any]], describe: env_pb2.DescribeResponse, *, name: str = "skill",
                    success: list[common_pb2.Condition] | None = None) -> str:
    """The Python source of a checked program (:func:`services.planner.programs.check_program`) for the env
    ``describe`` describes (its rules, idle action and stack limit). With the
    sub-task's ``success`` conditions the steps run again, pass after pass, until they hold (a pass that plays
    no frame ends it, as do :data:`PASSES` passes); without them, once.

    Each step is one generator function returning whether the sub-task's success holds after it; a ``repeat``
    calls the earlier steps' functions, so the code grows with the number of steps, never with what repeats
    unroll to (repeats of repeats would multiply a copied body)."""
    placeable = sorted({rule.item for rule in describe.rules.place})
    functions: list[str] = []
    for n, step in enumerate(steps, 1):
        if step["op"] == "repeat":
            parts = ", ".join(f"step_{k}" for k in range(n - step["last"], n))
            body = [f"for again in range({step['times']}):", f"    for part in ({parts},):",
                    "        if (yield from part(agent)):", "            return True", "return False"]
        else:  # the sub-task is done as soon as its success holds, mid-pass included
            body = [_call(step, n, describe, placeable), "return finished(agent, SUCCESS)"]
        functions.append(f"def step_{n}(agent):\n    # step {n}: {step_text(step)}\n"
                         + "".join(f"    {line}\n" for line in body))
    conditions = [condition_literal(c) for c in success or []]
    passes = PASSES if conditions else 1
    calls = "".join(f"        if (yield from step_{n}(agent)):\n            return\n" for n in range(1, len(steps) + 1))
    header = PROGRAM_HEADER + json.dumps(steps, separators=(",", ":"))
    return (f"{header}\n# Compiled by the planner from the skill program above ({name}); an error names its step.\n"
            f"STEP_LIMIT = {STEP_LIMIT}\nIDLE_LIMIT = {IDLE_LIMIT}\nIDLE = {_literal(describe.action_roles.idle)}\n"
            f"SUCCESS = {_literal(conditions)}\n{RUNTIME}\n\n"
            + "\n\n".join(functions) + "\n\n"
            f"def skill(agent):\n    for rerun in range({passes}):  # the steps again until the sub-task's success\n"
            f"        frames = agent.steps\n{calls}"
            f"        if finished(agent, SUCCESS) or agent.steps == frames:\n            return\n")


def program_of(code: str) -> list[dict[str, Any]] | None:
    """The steps a compiled program was made from (its first line), None for code that is not one."""
    first = code.split("\n", 1)[0]
    if not first.startswith(PROGRAM_HEADER):
        return None
    try:
        steps = json.loads(first[len(PROGRAM_HEADER):])
    except ValueError:
        return None
    return steps if isinstance(steps, list) else None
