"""Text from outside the server's own code (generated skill code and its worker, a model's answer) made safe to
send: every string a proto field or a gRPC status message holds must be UTF-8, and Python strings may hold lone
surrogates (``chr(0xD800)``, or a JSON ``"\\ud800"``), which UTF-8 cannot encode: protobuf and gRPC then raise
``UnicodeEncodeError`` where the answer is built."""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\N{REPLACEMENT CHARACTER}"
"""What stands in for each code point UTF-8 cannot encode (U+FFFD, as a UTF-8 decoder writes for bad bytes)."""


def encodable(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD; a surrogate pair (two code points that UTF-16 would
    join) becomes the one character it stands for. Text UTF-8 can encode comes back unchanged."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def encodable_tree(value: Any, max_chars: int = 0) -> Any:
    """A JSON-like value (dicts, lists, strings, numbers) with every string, keys too, made ``encodable``, and every
    string value cut to ``max_chars`` characters when it is set. Nesting deeper than the recursion limit raises
    RecursionError."""
    if isinstance(value, str):
        text = encodable(value)
        return text[:max_chars] if max_chars else text
    if isinstance(value, dict):
        return {encodable(str(k)): encodable_tree(v, max_chars) for k, v in value.items()}
    if isinstance(value, list):
        return [encodable_tree(v, max_chars) for v in value]
    return value
