"""The static policy and RestrictedPython layer, without a worker process."""

import pytest
from sandbox_support import DEEP_NESTING

from services.env_server.skills.compiler import compile_skill
from services.env_server.skills.sandbox import (
    Budget,
    SkillCheckError,
    StepBudgetExceeded,
    check_source,
    skill_globals,
)

LIMIT = 65536


def run_first(source: str, budget: int = 1000):
    checked = check_source(source, LIMIT)
    glb = skill_globals(Budget(budget))
    exec(compile_skill(checked), glb)
    return next(glb[checked.entry](object()))


@pytest.mark.parametrize(("source", "needle", "line"), [
    ("import os\ndef skill(agent):\n    yield 'noop'\n", "imports are not allowed", 1),
    ("from os import path\ndef skill(agent):\n    yield 'noop'\n", "imports are not allowed", 1),
    ("def skill(agent):\n    f = open('x')\n    yield 'noop'\n", "`open`", 2),
    ("def skill(agent):\n    eval('1')\n    yield 'noop'\n", "`eval`", 2),
    ("def skill(agent):\n    g = globals()\n    yield 'noop'\n", "`globals`", 2),
    ("def skill(agent):\n    x = ().__class__\n    yield 'noop'\n", "__class__", 2),
    ("def skill(agent):\n    g = (i for i in [1])\n    yield g.gi_frame\n", "gi_frame", 3),
    ("def skill(agent):\n    yield getattr(agent, '__dict__')\n", "getattr", 2),
    ("def skill(agent):\n    try:\n        yield 'noop'\n    except:\n        pass\n", "bare", 4),
    ("class A:\n    pass\ndef skill(agent):\n    yield 'noop'\n", "`class` is not allowed", 1),
    ("x = print('hi')\ndef skill(agent):\n    yield 'noop'\n", "literal constants", 1),
    ("def skill(agent):\n    return 'noop'\n", "no generator function", 1),
    ("def skill():\n    yield 'noop'\n", "exactly one argument", 1),
    ("def a(agent):\n    yield 1\ndef b(agent):\n    yield 2\n", "name the entry point", 3),
    ("def skill(agent)\n    yield 'noop'\n", "", 1),
    ("for i in range(3):\n    pass\ndef skill(agent):\n    yield 'noop'\n", "top level", 1),
    ("def skill(agent):\n    _x = 1\n    yield 'noop'\n", "rename `_x` to `x_`", 2),
    ("def skill(agent):\n    n = 0\n    def inc():\n        nonlocal n\n        n += 1\n    yield 'noop'\n",
     "keep shared state in a dict", 4),
    ("def skill(agent):\n    x = " + "-" * 150 + "1\n    yield 'noop'\n", "nested more than 100 levels", 2),
])
def test_policy_violations_name_the_line(source: str, needle: str, line: int) -> None:
    with pytest.raises(SkillCheckError) as info:
        compile_skill(check_source(source, LIMIT))
    assert needle in str(info.value)
    assert info.value.line == line


def test_size_limit_comes_first() -> None:
    with pytest.raises(SkillCheckError, match="bytes; the limit is 100"):
        check_source("#" * 1000, 100)


def test_valid_skill_runs_with_helpers_and_math() -> None:
    source = ("LIMIT = 3\n"
              "def helper(n):\n    return [i * 2 for i in range(n)]\n"
              "def skill(agent):\n    total = sum(helper(LIMIT)) + int(math.sqrt(16))\n"
              "    yield 'move_left' if total == 10 else 'noop'\n")
    assert run_first(source) == "move_left"


def test_while_loops_are_budgeted_and_cannot_be_swallowed() -> None:
    source = ("def skill(agent):\n    n = 0\n    while True:\n        try:\n            n += 1\n"
              "        except Exception:\n            pass\n    yield 'noop'\n")
    with pytest.raises(StepBudgetExceeded, match="line 3"):
        run_first(source)


def test_for_loops_and_comprehensions_are_budgeted() -> None:
    with pytest.raises(StepBudgetExceeded):
        run_first("def skill(agent):\n    x = [i for i in range(10 ** 7)]\n    yield 'noop'\n")


def test_private_attributes_of_agent_are_unreachable_at_runtime() -> None:
    source = "def skill(agent):\n    yield agent.inventory\n"

    class Agent:
        inventory = "ok"
        _memory = "secret"

    checked = check_source(source, LIMIT)
    glb = skill_globals(Budget(10))
    exec(compile_skill(checked), glb)
    assert next(glb["skill"](Agent())) == "ok"
    assert glb["_getattr_"](Agent(), "inventory") == "ok"
    with pytest.raises(AttributeError):
        glb["_getattr_"](Agent(), "_memory")


def test_str_format_fields_go_through_the_attribute_guard() -> None:
    assert run_first("def skill(agent):\n    yield '{0}-{k[a]}-{0.real}'.format(3, k={'a': 'x'})\n") == "3-x-3"
    assert run_first("def skill(agent):\n    yield str.format('{}{}', 1, 2)\n") == "12"
    for template in ("'{0.__class__}'", "'{0.gi_frame}'"):
        with pytest.raises(AttributeError, match="not allowed"):
            run_first(f"def skill(agent):\n    g = (i for i in [1])\n    yield {template}.format(g)\n")


@pytest.mark.parametrize("expression", DEEP_NESTING.values(), ids=DEEP_NESTING.keys())
def test_deep_nesting_is_refused_without_recursion_errors(expression: str) -> None:
    with pytest.raises(SkillCheckError) as info:
        compile_skill(check_source(f"def skill(agent):\n    x = {expression}\n    yield 'noop'\n", 10 ** 6))
    assert info.value.kind in ("SyntaxError", "PolicyViolation")
    assert "nest" in info.value.message or "parenthes" in info.value.message


def test_nesting_just_under_the_limit_compiles() -> None:
    source = "def skill(agent):\n    x = " + "[" * 90 + "1" + "]" * 90 + "\n    yield 'noop'\n"
    compile_skill(check_source(source, LIMIT))
