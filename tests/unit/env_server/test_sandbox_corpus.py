"""Ordinary Python a capable model writes, run through the real sandbox path, and the published rules.

Each corpus entry is the body of ``def skill(agent):`` (plus optional top-level helpers); it is checked,
compiled with RestrictedPython and run with the guarded globals, and the first value it yields must be
the expected one. The agent is a real CrafterAgent fed a perception, as in the worker.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pytest

from services.env_server.skills.api import CrafterAgent
from services.env_server.skills.compiler import compile_skill
from services.env_server.skills.sandbox import (
    SANDBOX_RULES,
    Budget,
    SkillCheckError,
    check_source,
    skill_globals,
)
from services.env_server.skills.worker import Worker

PERCEPTION = {"position": [5, 7], "facing": [0, 1], "view": [["grass"] * 9 for _ in range(7)],
              "view_origin": [1, 4], "inventory": {"wood": 2, "stone": 0},
              "status": {"health": 9, "food": 8, "drink": 7, "energy": 6}, "sleeping": False, "daylight": 1.0}


def run_skill(body: str, helpers: str = "", budget: int = 100000) -> Any:
    source = textwrap.dedent(helpers) + "def skill(agent):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    checked = check_source(source, 65536)
    glb = skill_globals(Budget(budget))
    exec(compile_skill(checked), glb)
    agent = CrafterAgent(["noop", "do"])
    agent._update(PERCEPTION, 0)
    return next(glb[checked.entry](agent))


CORPUS: list[tuple[str, str, str, Any]] = [
    ("tuple unpacking", "x, y = agent.position\nyield (y, x)", "", (7, 5)),
    ("swap", "a, b = 1, 2\na, b = b, a\nyield [a, b]", "", [2, 1]),
    ("nested unpacking", "(a, (b, c)) = (1, (2, 3))\nyield a + b + c", "", 6),
    ("starred assignment", "first, *rest = [1, 2, 3]\n*init, last = 'abc'\nyield (first, rest, init, last)", "",
     (1, [2, 3], ["a", "b"], "c")),
    ("unpacking in for", "total = 0\nfor k, v in {'a': 1, 'b': 2}.items():\n    total += v\nyield total", "", 3),
    ("unpacking in enumerate", "yield [i * x for i, x in enumerate([5, 6, 7], start=1)]", "", [5, 12, 21]),
    ("nested unpacking in for", "yield [a + b + c for a, (b, c) in [(1, (2, 3)), (4, (5, 6))]]", "", [6, 15]),
    ("call with *args", "args = [3, 4]\nyield max(*args)", "", 4),
    ("call with **kw", "def f(a, b=0):\n    return a - b\nkw = {'b': 2}\nyield f(5, **kw)", "", 3),
    ("call with both", "def f(*a, **k):\n    return (a, sorted(k))\nyield f(*[1, 2], **{'z': 1, 'y': 2})", "",
     ((1, 2), ["y", "z"])),
    ("augmented item", "counts = {'a': 3}\ncounts['a'] -= 1\ncounts['a'] += 10\nyield counts", "", {"a": 12}),
    ("augmented list item", "xs = [1, 2, 3]\ni = 1\nxs[i] *= 2\nxs[-1] **= 2\nyield xs", "", [1, 4, 9]),
    ("augmented nested item", "d = {'a': {'b': [1]}}\nd['a']['b'][0] += 4\nyield d", "", {"a": {"b": [5]}}),
    ("augmented slice", "xs = [1, 2, 3, 4]\nxs[1:3] += [9]\nyield xs", "", [1, 2, 3, 9, 4]),
    ("augmented key evaluated once", "calls = []\ndef k():\n    calls.append(1)\n    return 'a'\n"
     "d = {'a': 1}\nd[k()] += 1\nyield (d, len(calls))", "", ({"a": 2}, 1)),
    ("augmented in place keeps aliases", "a = [1]\nd = {'k': a}\nd['k'] += [2]\nyield a", "", [1, 2]),
    ("augmented name", "n = 1\nn += 2\nn <<= 1\ns = 'a'\ns *= 3\nyield (n, s)", "", (6, "aaa")),
    ("f-string", "x = 3.14159\nname = 'pi'\nyield f'{name}={x:.2f} {name!r} {[1, 2][0]}'", "", "pi=3.14 'pi' 1"),
    ("str.format", "yield '{} {:>3} {k}'.format(1, 'x', k=2)", "", "1   x 2"),
    ("format builtin", "yield format(3.5, '.1f')", "", "3.5"),
    ("list comprehension", "yield [x * x for x in range(5) if x % 2]", "", [1, 9]),
    ("dict comprehension", "yield {k: v for k, v in zip('ab', [1, 2])}", "", {"a": 1, "b": 2}),
    ("set comprehension", "yield {x % 3 for x in range(10)}", "", {0, 1, 2}),
    ("generator expression", "yield sum(x for x in range(5))", "", 10),
    ("nested comprehension", "yield [[i * j for j in range(3)] for i in range(2)]", "", [[0, 0, 0], [0, 1, 2]]),
    ("nested function and closure", "def make(n):\n    def add(x):\n        return x + n\n    return add\n"
     "yield make(3)(4)", "", 7),
    ("closure over loop state", "seen = []\ndef remember(x):\n    seen.append(x)\nfor i in range(3):\n"
     "    remember(i)\nyield seen", "", [0, 1, 2]),
    ("lambda", "f = lambda a, b=2: a * b\nyield f(3)", "", 6),
    ("min/max/sorted with key", "pts = [(3, 1), (1, 5), (2, 2)]\n"
     "yield (min(pts, key=lambda p: p[1]), max(pts, key=lambda p: p[0]), sorted(pts, key=lambda p: -p[0]))", "",
     ((3, 1), (3, 1), [(3, 1), (2, 2), (1, 5)])),
    ("sorted reverse", "yield sorted([3, 1, 2], reverse=True)", "", [3, 2, 1]),
    ("enumerate zip range", "yield list(zip(range(3), 'abc', [True] * 3))", "", [(0, "a", True), (1, "b", True),
                                                                                  (2, "c", True)]),
    ("zip strict", "try:\n    list(zip([1], [1, 2], strict=True))\nexcept ValueError as e:\n    yield str(e)", "",
     "zip() argument 2 is longer than argument 1"),
    ("map and filter", "yield (list(map(abs, [-1, 2])), list(map(lambda a, b: a + b, [1, 2], [3, 4])), "
     "list(filter(None, [0, 1, 2])), list(filter(lambda v: v > 1, [1, 2, 3])))", "",
     ([1, 2], [4, 6], [1, 2], [2, 3])),
    ("reversed and iter/next", "it = iter([1, 2, 3])\nfirst = next(it)\n"
     "yield (first, list(it), list(reversed([1, 2])), next(iter([]), 'empty'))", "", (1, [2, 3], [2, 1], "empty")),
    ("iter with sentinel", "data = [1, 2, 0, 3]\nit = iter(data)\nyield list(iter(lambda: next(it), 0))", "", [1, 2]),
    ("numbers", "yield (abs(-2), round(2.567, 2), divmod(7, 3), int('4'), float('1.5'), bool(0), str(5), "
     "len('abc'), pow(2, 5), 7 // 2, 7 % 3, -7 / 2)", "", (2, 2.57, (2, 1), 4, 1.5, False, "5", 3, 32, 3, 1, -3.5)),
    ("isinstance", "yield (isinstance(1, int), isinstance('a', (int, str)), isinstance([], dict))", "",
     (True, True, False)),
    ("string methods", "s = 'make_wood_pickaxe'\nyield (s.startswith('make_'), s.split('_'), '-'.join(['a', 'b']), "
     "s.replace('_', ' ').title(), s.upper()[:4], 'wood' in s, s.find('wood'), ' x '.strip())", "",
     (True, ["make", "wood", "pickaxe"], "a-b", "Make Wood Pickaxe", "MAKE", True, 5, "x")),
    ("try/except as", "try:\n    {}['missing']\nexcept KeyError as e:\n    msg = 'caught ' + str(e)\nyield msg", "",
     "caught 'missing'"),
    ("try/except Exception/else/finally", "log = []\ntry:\n    x = 1 / 0\nexcept Exception as e:\n"
     "    log.append(type_name(e))\nelse:\n    log.append('else')\nfinally:\n    log.append('finally')\nyield log",
     "def type_name(e):\n    return 'ZeroDivisionError' if isinstance(e, ZeroDivisionError) else 'other'\n",
     ["ZeroDivisionError", "finally"]),
    ("raise and catch own error", "try:\n    raise ValueError('bad')\nexcept ValueError as e:\n    yield e.args",
     "", ("bad",)),
    ("while/else", "n = 0\nwhile n < 3:\n    n += 1\nelse:\n    n += 10\nyield n", "", 13),
    ("while/break skips else", "n = 0\nwhile True:\n    n += 1\n    if n == 2:\n        break\nelse:\n    n = -1\n"
     "yield n", "", 2),
    ("for/else and continue", "out = []\nfor i in range(5):\n    if i % 2:\n        continue\n    out.append(i)\n"
     "else:\n    out.append('done')\nyield out", "", [0, 2, 4, "done"]),
    ("dict methods", "d = {'a': 1}\nd.setdefault('b', 2)\nv = d.pop('a')\nyield (d.get('b'), d.get('z', 0), "
     "sorted(d.items()), list(d.keys()), list(d.values()), v)", "", (2, 0, [("b", 2)], ["b"], [2], 1)),
    ("dict update and del", "d = {'a': 1, 'b': 2}\nd.update({'c': 3})\ndel d['a']\nd['x'] = 9\nyield d", "",
     {"b": 2, "c": 3, "x": 9}),
    ("list methods", "xs = [3, 1]\nxs.append(2)\nxs.extend([5, 4])\nlast = xs.pop()\nxs.sort(key=lambda v: -v)\n"
     "xs.insert(0, 0)\ndel xs[1]\nyield (xs, last, xs.index(2), xs.count(1))", "", ([0, 3, 2, 1], 4, 2, 1)),
    ("set methods", "s = {1, 2}\ns.add(3)\ns.discard(1)\ns.discard(99)\nyield (s, s | {9}, s & {2}, 2 in s)", "",
     ({2, 3}, {2, 3, 9}, {2}, True)),
    ("slicing", "xs = list(range(10))\nyield (xs[2:5], xs[::-3], xs[-2:], 'hello'[1:-1], xs[:2] + xs[8:])", "",
     ([2, 3, 4], [9, 6, 3, 0], [8, 9], "ell", [0, 1, 8, 9])),
    ("slice assignment", "xs = [0, 1, 2, 3]\nxs[1:3] = ['a']\nyield xs", "", [0, "a", 3]),
    ("in and chained comparisons", "x = 5\nyield (1 < x <= 5, 0 < x < 3, x in [5], 'a' not in 'bcd')", "",
     (True, False, True, True)),
    ("ternary and boolean ops", "x = None\nyield ('none' if x is None else 'some', x or 'default', 0 and 1)", "",
     ("none", "default", 0)),
    ("assert", "x = 2\nassert x > 1, 'x must be big'\ntry:\n    assert x > 5, 'too small'\n"
     "except AssertionError as e:\n    yield str(e)", "", "too small"),
    ("walrus", "data = [1, 2, 3]\nif (n := len(data)) > 2:\n    yield n", "", 3),
    ("print is harmless", "print('hello', 1, sep='-')\nyield 'printed'", "", "printed"),
    ("yield from nested generator", "def gen(n):\n    for i in range(n):\n        yield i * 10\n"
     "got = []\nfor v in gen(3):\n    got.append(v)\nyield got", "", [0, 10, 20]),
    ("yield from in the skill", "yield from helper(agent)",
     "def helper(agent):\n    yield agent.inventory['wood']\n", 2),
    ("yield from keeps the return value", "result = yield from sub()\n",
     "def sub():\n    return 5\n    yield 1\n", None),
    ("top-level helper generator", "moves = list(walk(3))\nyield moves",
     "def walk(n):\n    for _ in range(n):\n        yield 'move_left'\n", ["move_left"] * 3),
    ("top-level constants", "yield TARGETS['tree'] * LIMIT", "LIMIT = 3\nTARGETS = {'tree': 2}\n", 6),
    ("recursion in helpers", "yield fib(15)", "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n", 610),
    ("math", "yield (math.sqrt(16), math.floor(2.7), math.hypot(3, 4), round(math.pi, 2))", "",
     (4.0, 2, 5.0, 3.14)),
    ("agent helpers", "yield (agent.inventory['wood'], agent.health, agent.sees('grass'), agent.at(1, 4))", "",
     (2, 9, True, "grass")),
    ("any/all/sum", "xs = [1, 2, 3]\nyield (any(x > 2 for x in xs), all(x > 0 for x in xs), sum(xs, 10))", "",
     (True, True, 16)),
    ("list/dict/set/tuple constructors", "yield (list('ab'), dict(a=1), set([1, 1]), tuple([1]), frozenset([2]))", "",
     (["a", "b"], {"a": 1}, {1}, (1,), frozenset({2}))),
    ("underscore loop variable", "n = 0\nfor _ in range(3):\n    n += 1\nyield n", "", 3),
    ("dict iteration order and unpacking", "d = {'a': 1, 'b': 2}\nmerged = {**d, 'c': 3}\nyield [*merged]", "",
     ["a", "b", "c"]),
]


@pytest.mark.parametrize(("name", "body", "helpers", "expected"), CORPUS, ids=[c[0] for c in CORPUS])
def test_ordinary_python_runs_in_the_sandbox(name: str, body: str, helpers: str, expected: Any) -> None:
    if expected is None:  # a skill that returns before its first yield
        with pytest.raises(StopIteration):
            run_skill(body, helpers)
        return
    assert run_skill(body, helpers) == expected


def test_yield_from_returns_the_sub_generator_value() -> None:
    helpers = "def sub():\n    yield 'noop'\n    return 5\n"
    source = helpers + "def skill(agent):\n    result = yield from sub()\n    yield result\n"
    checked = check_source(source, 65536)
    glb = skill_globals(Budget(1000))
    exec(compile_skill(checked), glb)
    assert list(glb["skill"](None)) == ["noop", 5]


def test_corpus_runs_in_the_worker_class_too() -> None:
    """The worker's own path (load, start, advance) over a skill mixing the constructs above."""
    source = textwrap.dedent("""\
        def skill(agent):
            counts = {}
            x, y = agent.position
            for i, name in enumerate(['do', 'noop', 'do']):
                counts[name] = counts.get(name, 0)
                counts[name] += 1
            first, *rest = sorted(counts, key=lambda k: -counts[k])
            yield first if f"{x},{y}" == "5,7" else 'noop'
        """)
    worker = Worker(tick_budget=10000)
    assert worker.load("k", source, 65536) == {"ok": True}
    assert worker.start(0, "k", "crafter", ["noop", "do"]) == {"ok": True}
    assert worker.advance([[0, PERCEPTION]])["results"][0][1]["action"] == "do"


RULES_TEXT = " ".join(SANDBOX_RULES.split())


# --- SANDBOX_RULES: what it lists as forbidden is refused, and what it lists as allowed runs --------------
REFUSED = [
    ("import", "import math\ndef skill(agent):\n    yield 'noop'\n", 1, "agent"),
    ("class", "def skill(agent):\n    class A:\n        pass\n    yield 'noop'\n", 2, "dicts or tuples"),
    ("global", "N = 1\ndef skill(agent):\n    global N\n    yield 'noop'\n", 3, "dict or list"),
    ("nonlocal", "def skill(agent):\n    n = [0]\n    def f():\n        nonlocal n\n    yield 'noop'\n", 4,
     "dict or list"),
    ("with", "def skill(agent):\n    with agent:\n        pass\n    yield 'noop'\n", 2, "nothing to open"),
    ("async", "async def skill(agent):\n    yield 'noop'\n", 1, "plain generator"),
    ("except*", "def skill(agent):\n    try:\n        pass\n    except* ValueError:\n        pass\n    yield 'noop'\n",
     2, "except Exception"),
    ("bare `except:`", "def skill(agent):\n    try:\n        pass\n    except:\n        pass\n    yield 'noop'\n", 4,
     "except Exception"),
    ("`except BaseException`", "def skill(agent):\n    try:\n        pass\n    except BaseException:\n        pass\n"
     "    yield 'noop'\n", 4, "except Exception"),
    ("starting with `_`", "def skill(agent):\n    _hidden = 1\n    yield 'noop'\n", 2, "rename"),
    ("dunders", "def skill(agent):\n    yield agent.__class__\n", 2, "private"),
    ("getattr", "def skill(agent):\n    yield getattr(agent, 'health')\n", 2, "agent.name"),
    ("eval", "def skill(agent):\n    yield eval('1')\n", 2, "directly"),
    ("open", "def skill(agent):\n    yield open('/etc/passwd')\n", 2, "files"),
    ("type", "def skill(agent):\n    yield type(1)\n", 2, "isinstance"),
    ("gi_*", "def skill(agent):\n    g = (i for i in [1])\n    yield g.gi_frame\n", 3, "frames"),
    ("f_*", "def skill(agent):\n    yield agent.f_back\n", 2, "frames"),
    ("with_traceback", "def skill(agent):\n    yield ValueError().with_traceback(None)\n", 2, "frames"),
    ("nested more than", "def skill(agent):\n    x = " + "-" * 150 + "1\n    yield 'noop'\n", 2,
     "intermediate variables"),
]


@pytest.mark.parametrize(("rule", "source", "line", "hint"), REFUSED, ids=[r[0] for r in REFUSED])
def test_each_forbidden_rule_is_listed_and_refused_with_line_and_hint(rule: str, source: str, line: int,
                                                                     hint: str) -> None:
    assert rule in RULES_TEXT
    with pytest.raises(SkillCheckError) as info:
        compile_skill(check_source(source, 65536))
    assert info.value.line == line
    assert info.value.code_line
    assert hint in info.value.message


@pytest.mark.parametrize("name", ["map", "filter", "zip", "enumerate", "sorted", "min", "max", "format", "isinstance",
                                  "divmod", "round", "reversed", "iter", "next", "print"])
def test_listed_builtins_are_available(name: str) -> None:
    assert re.search(rf"\b{name}\b", RULES_TEXT.split("Builtins:")[1].split("- Top level")[0])
    assert run_skill(f"yield callable({name})") is True
