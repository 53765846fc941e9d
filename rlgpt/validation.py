"""Size and range checks of request fields at a servicer's edge, before any work is done.

Each check adds a problem naming the field, its size and the limit (never the value itself, which may
be megabytes); ``raise_if_any`` raises one InvalidArgument listing them. :mod:`rlgpt.request_limits` walks a
whole request with these checks, by the limits a service declares.
"""

from __future__ import annotations

from collections.abc import Sized

from rlgpt.errors import InvalidArgument, join_problems


class Problems:
    """Collects the problems of one request."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, problem: str) -> None:
        self.items.append(problem)

    def chars(self, field: str, value: str, limit: int) -> bool:
        """A string field of at most ``limit`` characters; returns whether it is within."""
        if len(value) > limit:
            self.items.append(f"{field} is {len(value)} chars; the limit is {limit}")
            return False
        return True

    def size(self, field: str, value: bytes, limit: int) -> bool:
        """A bytes field of at most ``limit`` bytes; returns whether it is within."""
        if len(value) > limit:
            self.items.append(f"{field} is {len(value)} bytes; the limit is {limit}")
            return False
        return True

    def entries(self, field: str, values: Sized, limit: int) -> bool:
        """A repeated field of at most ``limit`` entries; returns whether it is within."""
        if len(values) > limit:
            self.items.append(f"{field} has {len(values)} entries; the limit is {limit}")
            return False
        return True

    def names(self, field: str, values: list[str], max_entries: int, max_chars: int) -> None:
        """A repeated string field: its length, then (only when that is within) each entry's."""
        if self.entries(field, values, max_entries):
            for i, value in enumerate(values):
                self.chars(f"{field}[{i}]", value, max_chars)

    def in_range(self, field: str, value: int, low: int, high: int) -> None:
        if not low <= value <= high:
            self.items.append(f"{field}={value} must be in {low}..{high}")

    def raise_if_any(self) -> None:
        if self.items:
            raise InvalidArgument(join_problems(self.items))
