"""The limits every request field of a service keeps, declared once per service and checked at its edge.

A servicer declares its :class:`RequestLimits` as ``request_limits``; :func:`rlgpt.grpc_server.create_server` checks
every request of that service against them before the servicer sees it (:func:`check_request`), and the service
reports them to clients (``to_proto``: env Describe's ``limits.requests``, DescribeCritic, DescribeLearner,
DescribePlanner). The walk follows the request's proto descriptors, so a field added to a proto is bounded at once:

- a string is a name or id (at most ``name_chars``, no control character) or, where ``text_fields`` lists it, free
  text (at most ``text_chars``, no NUL); neither may hold a lone surrogate;
- a bytes field holds at most ``max_bytes``; a repeated or map field at most ``list_entries`` entries;
- a float or double is finite;
- ``fields`` gives a field a limit of its own: chars of a string, bytes of a bytes field, entries of a repeated one.

Each problem names the field (``task.success[0].item``), its size and the limit, never more than a few characters
of the value (:class:`~rlgpt.validation.Problems`); the message stays under 300 bytes
(:func:`rlgpt.errors.join_problems`).

``calls_at_once`` bounds the service's unary methods that may run long (a skill's test, an evaluation, an LLM
verdict): :func:`~rlgpt.grpc_server.create_server` gives each such call a thread of its own and refuses one more with
RESOURCE_EXHAUSTED, so that they can never take the threads health checks and Describe need.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from rlgpt.errors import MAX_REFUSAL_BYTES, join_problems
from rlgpt.v1 import common_pb2
from rlgpt.validation import Problems

NAME_CHARS = 128
"""Default max characters of a name or id in a request (a backend, task, skill, item, job or run id)."""
TEXT_CHARS = 8192
"""Default max characters of a free-text field of a request (a description)."""
LIST_ENTRIES = 256
"""Default max entries of a repeated field of a request."""
MAX_BYTES = 2_000_000
"""Default max bytes of a bytes field of a request (a PNG frame)."""
PATH_CHARS = 4096
"""Max characters of a path in a request (PATH_MAX on Linux)."""
CALLS_AT_ONCE = 16
"""Default number of calls of one long unary method (an evaluation, an LLM verdict) a service serves at once."""

_NAME_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""What a name may not hold: control characters (C0, DEL, C1) and lone surrogates."""
_TEXT_BAD = re.compile(r"[\x00\ud800-\udfff]")
"""What free text may not hold: NUL (it ends a C string, a path) and lone surrogates (no UTF-8 has them)."""
_FLOATS = (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE)
_WALKED = (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, *_FLOATS)
"""The types whose entries a repeated field's walk looks into (a Step's actions are not walked one by one)."""


def field_key(field: FieldDescriptor) -> str:
    """How limits name a field: ``Message.field`` (``TaskSpec.description``), the package left out."""
    return f"{field.containing_type.name}.{field.name}"


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """The limits of one service's requests, by kind of field, with fields that have limits of their own."""

    name_chars: int = NAME_CHARS
    """Max characters of a string field that is not free text."""
    text_chars: int = TEXT_CHARS
    """Max characters of a free-text field (``text_fields``)."""
    list_entries: int = LIST_ENTRIES
    """Max entries of a repeated or map field."""
    max_bytes: int = MAX_BYTES
    """Max bytes of a bytes field (and of each entry of a repeated one)."""
    text_fields: frozenset[str] = frozenset()
    """The string fields (``Message.field``) that hold free text: code, descriptions, trajectories, errors."""
    fields: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Fields (``Message.field``) with a limit of their own: chars of a string, bytes, or entries when repeated."""
    calls_at_once: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """The unary methods (by name, e.g. ``RunSkill``) that may run long, and how many calls of each are served at
    once (rlgpt.grpc_server: each on a thread of its own; one more is RESOURCE_EXHAUSTED)."""

    def problems(self, request: Message) -> list[str]:
        """Every problem of ``request`` (empty: it keeps every limit)."""
        p = Problems()
        self._message(p, "", request)
        return p.items

    def to_proto(self) -> common_pb2.RequestLimits:
        """The limits as clients read them."""
        return common_pb2.RequestLimits(
            max_name_chars=self.name_chars, max_text_chars=self.text_chars, max_list_entries=self.list_entries,
            max_bytes=self.max_bytes, text_fields=sorted(self.text_fields), fields=dict(self.fields),
            calls_at_once=dict(self.calls_at_once))

    # --- the walk -------------------------------------------------------------------------------------------
    def _message(self, p: Problems, prefix: str, message: Message) -> None:
        for field, value in message.ListFields():  # only the fields that are set
            path = f"{prefix}{field.name}"
            if field.is_repeated:
                limit = self.fields.get(field_key(field), self.list_entries)
                if p.entries(path, value, limit) and field.type in _WALKED:  # ints and bools hold nothing to check
                    for item_path, item_field, item in _entries(path, field, value):
                        self._value(p, item_path, item_field, item)
            else:
                self._value(p, path, field, value)

    def _value(self, p: Problems, path: str, field: FieldDescriptor, value: Any) -> None:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            self._message(p, f"{path}.", value)
        elif field.type == FieldDescriptor.TYPE_STRING:
            self._string(p, path, field, value)
        elif field.type == FieldDescriptor.TYPE_BYTES:
            p.size(path, value, self.max_bytes if field.is_repeated else self.fields.get(field_key(field),
                                                                                          self.max_bytes))
        elif field.type in _FLOATS and not math.isfinite(value):
            p.add(f"{path} is {value}; it must be a finite number")

    def _string(self, p: Problems, path: str, field: FieldDescriptor, value: str) -> None:
        key = field_key(field)
        text = key in self.text_fields
        limit = self.text_chars if text else self.name_chars
        if not field.is_repeated:
            limit = self.fields.get(key, limit)
        if p.chars(path, value, limit) and (problem := character_problem(value, text)):
            p.add(f"{path} {problem}")


def character_problem(value: str, text: bool) -> str:
    """What is wrong with the characters of a name (``text`` False) or of free text, "" when nothing is."""
    bad = (_TEXT_BAD if text else _NAME_BAD).search(value)
    if bad is None:
        return ""
    what = "a lone surrogate" if "\ud800" <= bad.group() <= "\udfff" else "a control character"
    kind = "text holds no NUL" if text else "a name holds no control characters"
    return f"holds {what} ({bad.group()!a} at {bad.start()}); {kind}"


def _entries(path: str, field: FieldDescriptor, value: Any) -> Iterator[tuple[str, FieldDescriptor, Any]]:
    """The entries of a repeated field, each with its path and the descriptor it is checked by; a map's keys and
    values apart, in the order of the keys (``action_shares[0].key``)."""
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key_field, value_field = entry.fields_by_name["key"], entry.fields_by_name["value"]
        for i, key in enumerate(sorted(value)):
            yield f"{path}[{i}].key", key_field, key
            yield f"{path}[{i}].value", value_field, value[key]
        return
    for i, item in enumerate(value):
        yield f"{path}[{i}]", field, item


def check_request(request: Message, limits: RequestLimits) -> str:
    """The refusal of ``request`` under ``limits``, or "" when it keeps them."""
    return join_problems(limits.problems(request), max_bytes=MAX_REFUSAL_BYTES)
