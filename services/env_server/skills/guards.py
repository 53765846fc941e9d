"""What skill code runs with: guarded builtins, RestrictedPython's hooks and the loop budget.

The static half (policy, compile) is :mod:`.sandbox`. Everything here runs in the sandbox worker next
to untrusted code; what a skill must not reach starts with ``_`` (refused at compile time and by
:func:`guarded_getattr`).

The iterator builtins (map, filter, zip, enumerate, reversed, iter) and the ``_getiter_`` hook are
small pure-Python classes rather than CPython's C iterators: a chain of C iterators (``x = map(f, x)``
150,000 times, then ``list(x)``) recurses in C and overflows the C stack, killing the worker, while a
chain of these costs one Python frame per level, which the recursion limit stops with a
RecursionError the skill can be told about. Being classes, not generators, their deallocation also
goes through CPython's trashcan instead of recursing through generator finalisers.
"""

from __future__ import annotations

import _string  # the field-name parser str.format itself uses
import math
import operator
import string
from collections.abc import Callable, Iterable
from typing import Any

from RestrictedPython.Eval import default_guarded_getitem
from RestrictedPython.Guards import full_write_guard, guarded_unpack_sequence, safe_builtins
from RestrictedPython.PrintCollector import PrintCollector

FORBIDDEN_CALLS = frozenset({
    "exec", "eval", "compile", "open", "globals", "locals", "vars", "getattr", "setattr", "delattr",
    "__import__", "input", "breakpoint", "help", "dir", "memoryview", "type", "object", "super",
    "classmethod", "staticmethod", "property", "exit", "quit", "id", "hash",
})
# Attributes that lead from a value to frames, code or globals (escape routes that need no dunder).
FORBIDDEN_ATTR_PREFIXES = ("gi_", "cr_", "ag_", "f_", "tb_", "co_", "func_", "im_")
FORBIDDEN_ATTRS = frozenset({"mro", "with_traceback"})


def forbidden_attr(name: str) -> bool:
    return name.startswith("_") or name in FORBIDDEN_ATTRS or name.startswith(FORBIDDEN_ATTR_PREFIXES)


class StepBudgetExceeded(BaseException):
    """A skill looped more than its budget between two yields.

    A BaseException so that a skill's own ``except Exception`` cannot swallow it.
    """


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

    def iterate(self, iterable: Iterable[Any]) -> Any:
        """``_getiter_``: every ``for`` loop and comprehension iterates through this (one tick per item)."""
        if isinstance(iterable, _Counted) and iterable._budget is self:
            return iterable  # already ticks
        return _Ticking(self, iterable)


class _Counted:
    """Base of the skill-visible iterators: one tick per item, one Python frame per chained level."""

    __slots__ = ("_budget", "_it")

    def __init__(self, budget: Budget, iterable: Iterable[Any]):
        self._budget = budget
        self._it = iter(iterable)

    def __iter__(self) -> _Counted:
        return self


class _Ticking(_Counted):
    __slots__ = ()

    def __next__(self) -> Any:
        self._budget.tick()
        return next(self._it)


class _Map(_Counted):
    __slots__ = ("_func", "_rest")

    def __init__(self, budget: Budget, func: Callable[..., Any], iterables: tuple[Iterable[Any], ...]):
        if not iterables:
            raise TypeError("map() must have at least two arguments.")
        super().__init__(budget, iterables[0])
        self._func = func
        self._rest = tuple(iter(it) for it in iterables[1:])

    def __next__(self) -> Any:
        self._budget.tick()
        if not self._rest:
            return self._func(next(self._it))
        args = [next(self._it)]
        for it in self._rest:
            args.append(next(it))
        return self._func(*args)


class _Filter(_Counted):
    __slots__ = ("_func",)

    def __init__(self, budget: Budget, func: Callable[[Any], Any] | None, iterable: Iterable[Any]):
        super().__init__(budget, iterable)
        self._func = func

    def __next__(self) -> Any:
        while True:
            self._budget.tick()
            item = next(self._it)
            if (self._func(item) if self._func is not None else item):
                return item


class _Zip(_Counted):
    __slots__ = ("_rest", "_strict")

    def __init__(self, budget: Budget, iterables: tuple[Iterable[Any], ...], strict: bool):
        super().__init__(budget, iterables[0] if iterables else ())
        self._rest = tuple(iter(it) for it in iterables[1:])
        self._strict = strict

    def __next__(self) -> tuple[Any, ...]:
        self._budget.tick()
        try:
            items = [next(self._it)]
        except StopIteration:
            if self._strict:
                for n, it in enumerate(self._rest, start=2):
                    if next(it, _MISSING) is not _MISSING:
                        raise ValueError(f"zip() argument {n} is longer than argument 1") from None
            raise
        for n, it in enumerate(self._rest, start=2):
            try:
                items.append(next(it))
            except StopIteration:
                if self._strict:
                    raise ValueError(f"zip() argument {n} is shorter than argument 1") from None
                raise
        return tuple(items)


class _Enumerate(_Counted):
    __slots__ = ("_n",)

    def __init__(self, budget: Budget, iterable: Iterable[Any], start: int):
        super().__init__(budget, iterable)
        self._n = operator.index(start)

    def __next__(self) -> tuple[int, Any]:
        self._budget.tick()
        item = next(self._it)
        n = self._n
        self._n = n + 1
        return n, item


class _UnpackEach(_Counted):
    """``_iter_unpack_sequence_``: ``for a, b in pairs`` unpacks each item through the guards."""

    __slots__ = ("_spec",)

    def __init__(self, budget: Budget, iterable: Iterable[Any], spec: dict[str, Any]):
        super().__init__(budget, iterable)
        self._spec = spec

    def __next__(self) -> Any:
        self._budget.tick()
        return guarded_unpack_sequence(next(self._it), self._spec, self._budget.iterate)


_MISSING = object()


class _SafeFormatter(string.Formatter):
    """``str.format`` whose fields ("{0.attr}", "{0[key]}") go through the same guard as ``x.attr``."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, Any]:
        first, rest = _string.formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attr, key in rest:
            obj = guarded_getattr(obj, key) if is_attr else obj[key]
        return obj, first


_FORMATTER = _SafeFormatter()


def _format_of(template: str, name: str) -> Callable[..., str]:
    if name == "format_map":
        return lambda mapping: _FORMATTER.vformat(template, (), mapping)
    return lambda *args, **kwargs: _FORMATTER.vformat(template, args, kwargs)


def _unbound_format(name: str) -> Callable[..., str]:
    def call(template: str, *args: Any, **kwargs: Any) -> str:
        if not isinstance(template, str):
            raise TypeError(f"str.{name} needs a str, not {type(template).__name__}")
        return _format_of(template, name)(*args, **kwargs)
    return call


def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
    """``_getattr_``: every ``x.attr`` of skill code; private and introspection attributes are refused."""
    if not isinstance(name, str) or forbidden_attr(name):
        raise AttributeError(f"access to attribute {name!r} is not allowed in skills")
    if name in ("format", "format_map"):
        if isinstance(obj, str):
            return _format_of(obj, name)
        if obj is str:
            return _unbound_format(name)
        raise AttributeError(f"`.{name}` is only available on strings in skills")
    return getattr(obj, name, *default)


_INPLACE = {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
            "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "|=": operator.ior,
            "&=": operator.iand, "^=": operator.ixor, "<<=": operator.ilshift, ">>=": operator.irshift,
            "@=": operator.imatmul}


def inplacevar(op: str, x: Any, y: Any) -> Any:
    """``_inplacevar_``: ``x op= y`` with Python's own in-place semantics (lists extend in place)."""
    try:
        return _INPLACE[op](x, y)
    except KeyError:
        raise SyntaxError(f"augmented assignment {op} is not supported") from None


def _apply(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``_apply_``: calls written ``f(*args, **kw)``."""
    return func(*args, **kwargs)


_SAFE_MATH = {name: getattr(math, name) for name in (
    "sqrt", "floor", "ceil", "fabs", "hypot", "atan2", "sin", "cos", "pi", "inf", "isfinite", "log", "exp")}


class _MathModule:
    """The few math functions skills may use, as ``math.sqrt(...)`` (no module object is exposed)."""

    def __init__(self) -> None:
        for name, value in _SAFE_MATH.items():
            setattr(self, name, value)


def _builtins_for(budget: Budget) -> dict[str, Any]:
    def map_(func: Callable[..., Any], *iterables: Iterable[Any]) -> _Map:
        return _Map(budget, func, iterables)

    def filter_(func: Callable[[Any], Any] | None, iterable: Iterable[Any]) -> _Filter:
        return _Filter(budget, func, iterable)

    def zip_(*iterables: Iterable[Any], strict: bool = False) -> _Zip:
        return _Zip(budget, iterables, strict)

    def enumerate_(iterable: Iterable[Any], start: int = 0) -> _Enumerate:
        return _Enumerate(budget, iterable, start)

    def reversed_(sequence: Any) -> _Ticking:
        return _Ticking(budget, reversed(sequence))

    def iter_(obj: Any, *sentinel: Any) -> Any:
        if sentinel:
            return _Ticking(budget, iter(obj, *sentinel))
        return budget.iterate(obj)

    names = {k: v for k, v in safe_builtins.items()
             if k not in FORBIDDEN_CALLS and not k.startswith("_") and k != "BaseException"}
    names.update({
        "min": min, "max": max, "sum": sum, "any": any, "all": all, "sorted": sorted, "list": list,
        "dict": dict, "set": set, "tuple": tuple, "frozenset": frozenset, "next": next, "format": format,
        "StopIteration": StopIteration, "map": map_, "filter": filter_, "zip": zip_, "enumerate": enumerate_,
        "reversed": reversed_, "iter": iter_,
    })
    return names


def skill_globals(budget: Budget) -> dict[str, Any]:
    """Fresh globals for one skill module: guarded builtins and RestrictedPython's hooks."""
    return {
        "__builtins__": _builtins_for(budget),
        "__name__": "skill",
        "__metaclass__": type,
        "_getattr_": guarded_getattr,
        "_getitem_": default_guarded_getitem,
        "_getiter_": budget.iterate,
        "_iter_unpack_sequence_": lambda it, spec, _getiter_: _UnpackEach(budget, it, spec),
        "_unpack_sequence_": guarded_unpack_sequence,
        "_apply_": _apply,
        "_write_": full_write_guard,
        "_inplacevar_": inplacevar,
        "_print_": PrintCollector,
        "_tick_": budget.tick,
        "math": _MathModule(),
    }

