"""The limits an answer schema enforces, as the sentence a prompt states them in.

A model that is not told a limit breaks it (a capable model's 450-character description against the schema's 400),
and the answer is refused. The sentence is computed from the schema itself, so a prompt states every length and
count limit the schema checks, and a changed limit changes the prompt with it. Names are left out: the schema
corrects a name into snake_case before it checks it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_LEFT_OUT = frozenset({"name"})
"""Fields whose form the schema corrects rather than refuses (snake_name), so no limit breaks them."""


def _span(low: int | None, high: int | None, unit: str) -> str:
    if high == 0:
        return "empty (no entries offered)"
    if low and high is not None:
        return f"{low:,} to {high:,} {unit}"
    if high is not None:
        return f"at most {high:,} {unit}"
    return f"at least {low:,} {unit}"


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The node itself, or the definition it refers to (``$ref``, or a single ``anyOf`` branch with one)."""
    if "$ref" in node:
        return defs[node["$ref"].rsplit("/", 1)[-1]]
    return node


def _walk(node: dict[str, Any], path: str, defs: dict[str, Any], out: list[str]) -> None:
    for field, prop in node.get("properties", {}).items():
        where = f"{path}{field}"
        prop = _resolve(prop, defs)
        if field not in _LEFT_OUT and ("maxLength" in prop or prop.get("minLength", 0) > 1):
            out.append(f"{where} {_span(prop.get('minLength'), prop.get('maxLength'), 'characters')}")
        if prop.get("type") == "array":
            if "maxItems" in prop or prop.get("minItems", 0) > 1:
                out.append(f"{where} {_span(prop.get('minItems'), prop.get('maxItems'), 'entries')}")
            items = _resolve(prop.get("items", {}), defs)
            _walk(items, f"{where}[].", defs, out)
        elif prop.get("type") == "object" or "properties" in prop:
            _walk(prop, f"{where}.", defs, out)


def answer_limits(schema: type[BaseModel]) -> str:
    """Every length and count limit of ``schema``'s fields, e.g. ``description at most 400 characters; code 10 to
    8,000 characters`` (nested fields as ``subtasks[].description``); empty when it has none."""
    doc = schema.model_json_schema()
    out: list[str] = []
    _walk(doc, "", doc.get("$defs", {}), out)
    return "; ".join(out)
