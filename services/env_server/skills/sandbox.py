"""Checks untrusted skill code before it is compiled (the static half of the sandbox, first part).

Layers, outermost first: a size limit, a nesting-depth limit checked without recursion (so nothing
recursive below ever sees a deep tree), and our own AST policy (one generator entry point, no imports,
no dunders, no frame/code introspection, no exec/eval/open/globals); :data:`SANDBOX_RULES` says the
same to the LLM. Then :mod:`.compiler` compiles with RestrictedPython (guards on attribute access,
item access, iteration, writes) and a loop-iteration budget injected into every loop. The runtime half
(guarded builtins, hooks) is :mod:`.guards`; the worker process (:mod:`.worker`) adds memory,
wall-clock and OS limits.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from typing import Any

from services.env_server.skills.guards import (  # noqa: F401 - re-exported for the worker and tests
    FORBIDDEN_ATTR_PREFIXES,
    FORBIDDEN_ATTRS,
    FORBIDDEN_CALLS,
    Budget,
    StepBudgetExceeded,
    forbidden_attr,
    skill_globals,
)

SKILL_FILENAME = "<skill>"
MAX_AST_NODES = 20000
MAX_NESTING = 100
"""Deepest syntax tree a skill may have; RestrictedPython's transformer and ``compile`` recurse per level."""

_LISTED_CALLS = " ".join(sorted(n for n in FORBIDDEN_CALLS if not n.startswith("_")))
_LISTED_ATTRS = " ".join([p + "*" for p in FORBIDDEN_ATTR_PREFIXES] + sorted(FORBIDDEN_ATTRS))
SANDBOX_RULES = textwrap.dedent(f"""\
    Skill code rules (checked at registration; a refused line is named with what to write instead):
    - Allowed: ordinary Python functions: if/elif/else, for and while (with else), break/continue,
      try/except Exception as e/else/finally, raise, assert, del d[k], return, tuple unpacking
      (x, y = agent.position; a, b = b, a; first, *rest = xs; for i, (x, y) in enumerate(cells)),
      augmented assignment (n += 1; counts[k] -= 1; xs[i] *= 2), comprehensions and generator
      expressions, nested functions, closures, lambdas, f(*args, **kw), slicing, chained comparisons,
      ternaries, :=, f-strings and str.format ("{{0[x]}}" and "{{0.attr}}" fields are guarded like code),
      helper functions and helper generators at the top level (yield from helper(agent)).
    - Builtins: abs all any bool callable chr dict divmod enumerate filter float format frozenset int
      isinstance iter len list map max min next ord pow print range repr reversed round set slice
      sorted str sum tuple zip, the exceptions (Exception, ValueError, KeyError, StopIteration, ...),
      and without import math.sqrt floor ceil fabs hypot atan2 sin cos log exp isfinite pi inf.
      print output is dropped.
    - Top level: only `def` statements and constant assignments (NAME = literal). The entry point is
      the one top-level generator (or the one named `skill`) taking exactly one argument, `agent`.
    - Not allowed: import (everything is on `agent`; `math` is predefined); class (use dicts or
      tuples); global or nonlocal (keep shared state in a dict or list: state["n"] += 1); with;
      async/await; except*; bare `except:` or `except BaseException` (catch Exception); names or
      attributes starting with `_` (dunders included); the builtins
      {_LISTED_CALLS};
      attributes that reach frames or code ({_LISTED_ATTRS});
      code nested more than {MAX_NESTING} levels deep (use intermediate variables).
    - Giving up on purpose: `raise ValueError("what is missing and what to do first")` ends the skill;
      its tests report that message with the line (registration accepts it: not a code error).
    - Limits between two yields: a loop-iteration budget and a wall-clock limit; also memory, and a
      recursion depth of about 400 frames (chains of map/filter/zip/generators count as frames).
    """)

_FORBIDDEN_STATEMENTS: dict[type, str] = {
    ast.ClassDef: "`class` is not allowed in skills; use dicts or tuples for records",
    ast.AsyncFunctionDef: "async code is not allowed; a skill is a plain generator function",
    ast.Await: "async code is not allowed; a skill is a plain generator function",
    ast.AsyncFor: "async code is not allowed; a skill is a plain generator function",
    ast.AsyncWith: "async code is not allowed; a skill is a plain generator function",
    ast.Global: "`global` is not allowed; keep shared state in a dict or list (state['n'] += 1)",
    ast.Nonlocal: "`nonlocal` is not allowed; keep shared state in a dict or list (state['n'] += 1)",
    ast.With: "`with` is not allowed in skills; there is nothing to open or close",
    **({ast.TryStar: "`except*` is not allowed; use `except Exception as e`"} if hasattr(ast, "TryStar") else {}),
}
_CALL_HINTS = {
    "getattr": "write agent.name directly", "setattr": "use a dict for mutable records",
    "delattr": "use a dict for mutable records", "eval": "write the code directly",
    "exec": "write the code directly", "compile": "write the code directly", "open": "skills cannot use files",
    "globals": "pass values as arguments", "locals": "pass values as arguments", "vars": "use a dict",
    "type": "use isinstance(x, int)", "id": "compare with == or `is`", "hash": "use the value as a dict key",
    "exit": "use `return` to end the skill", "quit": "use `return` to end the skill",
    "input": "read everything from `agent`", "dir": "see the agent API text", "help": "see the agent API text",
}


class SkillCheckError(Exception):
    """Code refused before running: ``kind`` is SyntaxError or PolicyViolation, ``line`` is 1-based."""

    def __init__(self, kind: str, message: str, line: int = 0, code_line: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line
        self.code_line = code_line

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        shown = f" [{self.code_line}]" if self.code_line else ""
        return f"{self.kind}: {where}{self.message}{shown}"


@dataclasses.dataclass(frozen=True)
class CheckedSkill:
    """Source that passed the policy: its entry-point function name."""

    source: str
    entry: str


def source_line(source: str, line: int) -> str:
    lines = source.splitlines()
    return lines[line - 1].strip()[:200] if 0 < line <= len(lines) else ""


def _is_generator(func: ast.FunctionDef) -> bool:
    """Whether ``func`` itself yields (yields inside nested functions do not count)."""
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _too_deep(tree: ast.AST) -> int | None:
    """The line of the first node nested deeper than MAX_NESTING (0 if unknown), found without recursion."""
    stack: list[tuple[ast.AST, int, int]] = [(tree, 0, 0)]
    while stack:
        node, depth, line = stack.pop()
        line = getattr(node, "lineno", line)
        if depth > MAX_NESTING:
            return line
        stack.extend((child, depth + 1, line) for child in ast.iter_child_nodes(node))
    return None


def _name_problem(name: str) -> str | None:
    if name in FORBIDDEN_CALLS:
        hint = _CALL_HINTS.get(name)
        return f"the name `{name}` is not allowed in skills" + (f"; {hint}" if hint else "")
    if name.startswith("_") and name != "_":
        return f"names starting with `_` are reserved for the sandbox; rename `{name}` to `{name.lstrip('_')}_`"
    return None


def _policy_problem(node: ast.AST) -> str | None:
    """What is wrong with one node, or None."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "imports are not allowed; everything a skill needs is on `agent` (and `math` is predefined)"
    if type(node) in _FORBIDDEN_STATEMENTS:
        return _FORBIDDEN_STATEMENTS[type(node)]
    if isinstance(node, ast.ExceptHandler):
        if node.type is None or (isinstance(node.type, ast.Name) and node.type.id == "BaseException"):
            return "bare `except:` / `except BaseException` is not allowed; write `except Exception:`"
        return _name_problem(node.name) if node.name else None
    if isinstance(node, ast.Name):
        return _name_problem(node.id)
    if isinstance(node, (ast.FunctionDef, ast.arg)):
        return _name_problem(node.name if isinstance(node, ast.FunctionDef) else node.arg)
    if isinstance(node, ast.Attribute) and forbidden_attr(node.attr):
        if node.attr.startswith("_"):
            return f"access to attribute `.{node.attr}` is not allowed: attributes starting with `_` are private"
        return f"access to attribute `.{node.attr}` is not allowed: frames and code are not reachable from skills"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("__") \
            and node.value.endswith("__"):
        return f"the string {node.value!r} looks like a dunder name; not allowed"
    return None


def check_source(source: str, max_bytes: int) -> CheckedSkill:
    """Applies the size limit and the AST policy; raises SkillCheckError naming the first bad line."""
    size = len(source.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise SkillCheckError("PolicyViolation", f"code is {size} bytes; the limit is {max_bytes}")
    if "\x00" in source:
        raise SkillCheckError("SyntaxError", "code contains a NUL byte")
    try:
        tree = ast.parse(source, SKILL_FILENAME)
    except SyntaxError as exc:
        line = exc.lineno or 0
        raise SkillCheckError("SyntaxError", f"{exc.msg}", line, source_line(source, line)) from None
    except (RecursionError, MemoryError, ValueError, OverflowError) as exc:
        raise SkillCheckError("SyntaxError", f"code cannot be parsed: {type(exc).__name__} (nested too deeply? "
                              f"keep expressions under {MAX_NESTING} levels)") from None

    def violation(node: ast.AST, message: str) -> SkillCheckError:
        line = getattr(node, "lineno", 0)
        return SkillCheckError("PolicyViolation", message, line, source_line(source, line))

    deep = _too_deep(tree)
    if deep is not None:
        raise SkillCheckError("PolicyViolation", f"code is nested more than {MAX_NESTING} levels deep; split the "
                              "expression into steps with intermediate variables", deep, source_line(source, deep))
    for count, node in enumerate(ast.walk(tree), start=1):
        if count > MAX_AST_NODES:
            raise SkillCheckError("PolicyViolation", f"code has more than {MAX_AST_NODES} syntax nodes; "
                                  "write a shorter skill")
        problem = _policy_problem(node)
        if problem:
            raise violation(node, problem)
    return CheckedSkill(source=source, entry=_entry_point(tree, violation, source))


def _entry_point(tree: ast.Module, violation: Any, source: str) -> str:
    entries = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            if _is_generator(stmt):
                entries.append(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            try:
                ast.literal_eval(stmt.value)  # module level runs no code: literals only
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                raise violation(stmt, "top-level assignments must be literal constants "
                                      "(numbers, strings, lists/dicts of them); compute values inside a "
                                      "function") from None
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring
        else:
            raise violation(stmt, "only function definitions and constant assignments may stand at the "
                                  "top level of a skill; move this statement into a function")
    if not entries:
        raise SkillCheckError("PolicyViolation", "no generator function found: a skill is `def skill(agent):` "
                              "with at least one `yield \"<action>\"`", 1, source_line(source, 1))
    if len(entries) > 1:
        named = [f for f in entries if f.name == "skill"]
        if len(named) != 1:
            raise violation(entries[1], "more than one top-level generator; name the entry point `skill`")
        entries = named
    entry = entries[0]
    args = entry.args
    positional = args.posonlyargs + args.args
    if len(positional) - len(args.defaults) != 1 or args.vararg or args.kwonlyargs or args.kwarg:
        raise violation(entry, f"the skill `{entry.name}` must take exactly one argument, `agent`")
    return entry.name
