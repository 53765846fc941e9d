"""rlgpt.text: text UTF-8 cannot encode (lone surrogates) made sendable, and JSON-like values cleaned throughout."""

from __future__ import annotations

import json

import pytest

from rlgpt.text import REPLACEMENT, encodable, encodable_tree
from rlgpt.v1 import common_pb2


@pytest.mark.parametrize(("text", "expected"), [
    ("\ud800", REPLACEMENT),
    ("gave up \udc80!", f"gave up {REPLACEMENT}!"),
    ("\ud800\ud800x", f"{REPLACEMENT}{REPLACEMENT}x"),
    ("end \ud83d", f"end {REPLACEMENT}"),
    ("\ud83d\ude00", "\U0001f600"),  # a pair stands for one character: it is kept as that character
])
def test_every_lone_surrogate_is_replaced(text: str, expected: str) -> None:
    assert encodable(text) == expected
    common_pb2.SkillError(message=encodable(text)).SerializeToString()  # what failed before


@pytest.mark.parametrize("text", ["", "plain", "é ü 中文 😀", "\x00\x1b[31m control", "\ufffd already"])
def test_encodable_text_comes_back_unchanged(text: str) -> None:
    assert encodable(text) is text


def test_a_tree_has_every_string_cleaned_keys_too() -> None:
    tree = json.loads('{"error": {"type": "ValueError", "message": "bad \\ud800", "line": 3}, '
                      '"results": [[0, {"action": "noop"}], [1, "\\udc80"]], "\\ud800": true, "n": 1.5}')
    assert encodable_tree(tree) == {
        "error": {"type": "ValueError", "message": f"bad {REPLACEMENT}", "line": 3},
        "results": [[0, {"action": "noop"}], [1, REPLACEMENT]], REPLACEMENT: True, "n": 1.5}


def test_a_tree_can_have_its_strings_cut() -> None:
    assert encodable_tree({"message": "x" * 5000, "list": ["abcdef"], "n": 7}, max_chars=4) == {
        "message": "xxxx", "list": ["abcd"], "n": 7}
