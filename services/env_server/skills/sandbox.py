"""Checks and compiles untrusted skill code; builds the guarded globals it runs with.

Layers, outermost first: a size limit, our own AST policy (one generator entry point, no imports,
no dunders, no frame/code introspection, no exec/eval/open/globals), RestrictedPython's compiler
(guards on attribute access, item access, iteration, writes), a loop-iteration budget injected into
every loop, and, in the worker process (:mod:`.worker`), a memory limit plus a wall-clock limit
enforced by killing the process.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Iterable, Iterator
from typing import Any

from RestrictedPython import RestrictingNodeTransformer, compile_restricted_exec
from RestrictedPython.Eval import default_guarded_getitem
from RestrictedPython.Guards import full_write_guard, guarded_iter_unpack_sequence, safe_builtins
from RestrictedPython.PrintCollector import PrintCollector

SKILL_FILENAME = "<skill>"
MAX_AST_NODES = 20000

FORBIDDEN_CALLS = frozenset({
    "exec", "eval", "compile", "open", "globals", "locals", "vars", "getattr", "setattr", "delattr",
    "__import__", "input", "breakpoint", "help", "dir", "memoryview", "type", "object", "super",
    "classmethod", "staticmethod", "property", "exit", "quit", "id", "hash",
})
# Attributes that lead from a value to frames, code or globals (escape routes that need no dunder).
_FORBIDDEN_ATTR_PREFIXES = ("gi_", "cr_", "ag_", "f_", "tb_", "co_", "func_", "im_")
_FORBIDDEN_ATTRS = frozenset({"mro", "format", "format_map", "with_traceback"})
_FORBIDDEN_STATEMENTS: tuple[type, ...] = (
    ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith, ast.Global, ast.Nonlocal, ast.With,
    *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


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


class StepBudgetExceeded(BaseException):
    """A skill looped more than its budget between two yields.

    A BaseException so that a skill's own ``except Exception`` cannot swallow it.
    """


@dataclasses.dataclass(frozen=True)
class CheckedSkill:
    """Source that passed the policy: its entry-point function name."""

    source: str
    entry: str


def source_line(source: str, line: int) -> str:
    lines = source.splitlines()
    return lines[line - 1].strip()[:200] if 0 < line <= len(lines) else ""


def _forbidden_attr(name: str) -> bool:
    return name.startswith("_") or name in _FORBIDDEN_ATTRS or name.startswith(_FORBIDDEN_ATTR_PREFIXES)


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
        raise SkillCheckError("SyntaxError", f"code cannot be parsed: {type(exc).__name__} "
                              "(nested too deeply?)") from None

    def violation(node: ast.AST, message: str) -> SkillCheckError:
        line = getattr(node, "lineno", 0)
        return SkillCheckError("PolicyViolation", message, line, source_line(source, line))

    for count, node in enumerate(ast.walk(tree), start=1):
        if count > MAX_AST_NODES:
            raise SkillCheckError("PolicyViolation", f"code has more than {MAX_AST_NODES} syntax nodes")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            raise violation(node, "imports are not allowed; everything a skill needs is on `agent`")
        if isinstance(node, _FORBIDDEN_STATEMENTS):
            raise violation(node, f"`{type(node).__name__}` statements are not allowed in skills")
        if isinstance(node, ast.ExceptHandler) and (node.type is None or (
                isinstance(node.type, ast.Name) and node.type.id == "BaseException")):
            raise violation(node, "bare `except:` / `except BaseException` is not allowed; catch Exception")
        if isinstance(node, ast.Name) and (node.id.startswith("__") or node.id in FORBIDDEN_CALLS):
            raise violation(node, f"the name `{node.id}` is not allowed in skills")
        if isinstance(node, ast.Attribute) and _forbidden_attr(node.attr):
            raise violation(node, f"access to attribute `.{node.attr}` is not allowed in skills")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("__") \
                and node.value.endswith("__"):
            raise violation(node, f"the string {node.value!r} looks like a dunder name; not allowed")

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
                                      "(numbers, strings, lists/dicts of them)") from None
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring
        else:
            raise violation(stmt, "only function definitions and constant assignments may stand at the "
                                  "top level of a skill")
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
    return CheckedSkill(source=source, entry=entry.name)




class _BudgetedTransformer(RestrictingNodeTransformer):
    """RestrictedPython's policy plus a ``_tick_(line)`` call at the top of every ``while`` body.

    ``for`` loops and comprehensions are already routed through ``_getiter_``, which counts too.
    """

    def visit_While(self, node: ast.While) -> ast.AST:
        node = self.node_contents_visit(node)
        tick = ast.Expr(ast.Call(ast.Name("_tick_", ast.Load()), [ast.Constant(node.lineno)], []))
        node.body.insert(0, ast.copy_location(tick, node))
        ast.fix_missing_locations(node)
        return node


def compile_skill(checked: CheckedSkill) -> Any:
    """Compiles checked source with RestrictedPython; raises SkillCheckError on a refused construct."""
    result = compile_restricted_exec(checked.source, SKILL_FILENAME, policy=_BudgetedTransformer)
    if result.errors:
        first = result.errors[0]
        line = _line_from_restricted_error(first)
        raise SkillCheckError("PolicyViolation", "; ".join(result.errors), line, source_line(checked.source, line))
    return result.code


def _line_from_restricted_error(text: str) -> int:
    # RestrictedPython formats errors as "Line N: ...".
    if text.startswith("Line "):
        digits = text[5:].split(":", 1)[0]
        if digits.isdigit():
            return int(digits)
    return 0


class Budget:
    """Loop iterations a skill may run between two yields (reset by the worker at each resume)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0

    def tick(self, line: int = 0) -> None:
        self.used += 1
        if self.used > self.limit:
            where = f" (loop at line {line})" if line else ""
            raise StepBudgetExceeded(f"more than {self.limit} loop iterations without yielding an action{where}")

    def iterate(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iter(iterable):
            self.tick()
            yield item


def _safer_getattr(obj: Any, name: str, default: Any = None, *args: Any) -> Any:
    if not isinstance(name, str) or _forbidden_attr(name):
        raise AttributeError(f"access to attribute {name!r} is not allowed in skills")
    if args:
        raise TypeError("getattr takes at most three arguments")
    return getattr(obj, name, default) if default is not None else getattr(obj, name)


def _inplacevar(op: str, x: Any, y: Any) -> Any:
    ops = {"+=": lambda: x + y, "-=": lambda: x - y, "*=": lambda: x * y, "/=": lambda: x / y,
           "//=": lambda: x // y, "%=": lambda: x % y, "**=": lambda: x ** y, "|=": lambda: x | y,
           "&=": lambda: x & y, "^=": lambda: x ^ y, "<<=": lambda: x << y, ">>=": lambda: x >> y}
    if op not in ops:
        raise SyntaxError(f"augmented assignment {op} is not supported")
    return ops[op]()


_EXTRA_BUILTINS = {
    name: obj for name, obj in {
        "min": min, "max": max, "sum": sum, "any": any, "all": all, "enumerate": enumerate, "zip": zip,
        "sorted": sorted, "reversed": reversed, "list": list, "dict": dict, "set": set, "tuple": tuple,
        "map": map, "filter": filter, "frozenset": frozenset, "iter": iter, "next": next,
        "StopIteration": StopIteration,
    }.items()
}
_SAFE_MATH = {name: getattr(math, name) for name in (
    "sqrt", "floor", "ceil", "fabs", "hypot", "atan2", "sin", "cos", "pi", "inf", "isfinite", "log", "exp")}


class _MathModule:
    """The few math functions skills may use, as ``math.sqrt(...)`` (no module object is exposed)."""

    def __init__(self) -> None:
        for name, value in _SAFE_MATH.items():
            setattr(self, name, value)


def skill_globals(budget: Budget) -> dict[str, Any]:
    """Fresh globals for one skill module: guarded builtins and RestrictedPython's hooks."""
    builtins = {k: v for k, v in safe_builtins.items()
                if k not in FORBIDDEN_CALLS and not k.startswith("__") and k != "BaseException"}
    builtins.update(_EXTRA_BUILTINS)
    return {
        "__builtins__": builtins,
        "__name__": "skill",
        "__metaclass__": type,
        "_getattr_": _safer_getattr,
        "_getitem_": default_guarded_getitem,
        "_getiter_": budget.iterate,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_write_": full_write_guard,
        "_inplacevar_": _inplacevar,
        "_print_": PrintCollector,
        "_tick_": budget.tick,
        "math": _MathModule(),
    }
