"""Compiles checked skill code (the static half of the sandbox, second part): RestrictedPython's
compiler, whose policy guards attribute access, item access, iteration and writes, extended with a
loop-iteration budget in every ``while``, budgeted ``yield from`` and guarded augmented assignment.
What reaches it has passed :func:`.sandbox.check_source`.
"""

from __future__ import annotations

import ast
from typing import Any

from RestrictedPython import RestrictingNodeTransformer, compile_restricted_exec
from RestrictedPython.transformer import IOPERATOR_TO_STR, copy_locations

from services.env_server.skills.guards import forbidden_attr
from services.env_server.skills.sandbox import SKILL_FILENAME, CheckedSkill, SkillCheckError, source_line


def _load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _call(func: str, *args: ast.expr) -> ast.Call:
    return ast.Call(_load(func), list(args), [])


class _BudgetedTransformer(RestrictingNodeTransformer):
    """RestrictedPython's policy, a ``_tick_(line)`` in every ``while`` body, and guarded augmented
    assignment to items and attributes.

    ``for`` loops and comprehensions are already routed through ``_getiter_``, which counts too.
    """

    def visit_While(self, node: ast.While) -> ast.AST:
        node = self.node_contents_visit(node)
        tick = ast.Expr(_call("_tick_", ast.Constant(node.lineno)))
        node.body.insert(0, ast.copy_location(tick, node))
        ast.fix_missing_locations(node)
        return node

    def visit_YieldFrom(self, node: ast.YieldFrom) -> ast.AST:
        """``yield from x`` -> ``yield from _getiter_(x)``: budgeted, and a chain of ``yield from`` generators no
        longer closes its sub-generators recursively in C (which overflows the C stack when deep)."""
        node = self.node_contents_visit(node)
        node.value = ast.copy_location(_call("_getiter_", node.value), node.value)
        ast.fix_missing_locations(node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        """``obj[key] op= value`` -> ``t1 = obj; t2 = key; _write_(t1)[t2] = _inplacevar_(op, _getitem_(t1, t2),
        value)``: the container and key are evaluated once, in Python's order, and every access is guarded
        (``obj.attr op= value`` likewise with ``_getattr_``)."""
        target = node.target
        if isinstance(target, ast.Name):
            return super().visit_AugAssign(node)
        if isinstance(target, ast.Attribute) and forbidden_attr(target.attr):
            self.error(node, f'"{target.attr}" is an invalid attribute name.')
            return node
        assert isinstance(target, (ast.Subscript, ast.Attribute))
        statements: list[ast.stmt] = []

        def temp(value: ast.expr) -> str:
            name = self.gen_tmp_name()
            statements.append(ast.Assign([ast.Name(name, ast.Store())], value))
            return name

        obj = temp(self.visit(target.value))
        if isinstance(target, ast.Attribute):
            current: ast.expr = _call("_getattr_", _load(obj), ast.Constant(target.attr))
            store: ast.expr = ast.Attribute(_call("_write_", _load(obj)), target.attr, ast.Store())
        else:
            key = target.slice
            if isinstance(key, ast.Slice):
                parts = [temp(self.visit(p)) if p is not None else None for p in (key.lower, key.upper, key.step)]

                def key_node() -> ast.expr:
                    return ast.Slice(*(_load(p) if p else None for p in parts))
            else:
                key_name = temp(self.visit(key))

                def key_node() -> ast.expr:
                    return _load(key_name)
            current = _call("_getitem_", _load(obj), key_node())
            store = ast.Subscript(_call("_write_", _load(obj)), key_node(), ast.Store())
        value = _call("_inplacevar_", ast.Constant(IOPERATOR_TO_STR[type(node.op)]), current, self.visit(node.value))
        statements.append(ast.Assign([store], value))
        for statement in statements:
            copy_locations(statement, node)
            ast.fix_missing_locations(statement)
        return statements


def compile_skill(checked: CheckedSkill) -> Any:
    """Compiles checked source with RestrictedPython; raises SkillCheckError on a refused construct."""
    try:
        result = compile_restricted_exec(checked.source, SKILL_FILENAME, policy=_BudgetedTransformer)
    except (RecursionError, MemoryError) as exc:
        raise SkillCheckError("PolicyViolation", f"code cannot be compiled: {type(exc).__name__}; it is nested "
                              "too deeply or too large") from None
    if result.errors:
        first = result.errors[0]
        line = _line_from_restricted_error(first)
        message = "; ".join(result.errors)
        if 'starts with "_"' in message:
            message += " (names starting with `_` are reserved for the sandbox)"
        raise SkillCheckError("PolicyViolation", message, line, source_line(checked.source, line))
    return result.code


def _line_from_restricted_error(text: str) -> int:
    # RestrictedPython formats errors as "Line N: ...".
    if text.startswith("Line "):
        digits = text[5:].split(":", 1)[0]
        if digits.isdigit():
            return int(digits)
    return 0
