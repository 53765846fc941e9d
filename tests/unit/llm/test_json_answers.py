"""parse_json_leniently: a model's JSON answer, every string of it sendable, a too-deep answer invalid like others."""

from __future__ import annotations

import pytest

from rlgpt.llm.client import parse_json_leniently
from rlgpt.text import REPLACEMENT


def test_lone_surrogates_are_replaced_wherever_they_are() -> None:
    text = 'Here it is: {"plan": [{"name": "a\\ud800", "\\udc00": "b"}], "note": "' + chr(0xD800) + '"} done'
    assert parse_json_leniently(text) == {"plan": [{"name": f"a{REPLACEMENT}", REPLACEMENT: "b"}],
                                          "note": REPLACEMENT}


def test_a_surrogate_pair_is_the_character_it_stands_for() -> None:
    assert parse_json_leniently('```json\n{"mood": "\\ud83d\\ude00"}\n```') == {"mood": "\U0001f600"}


def test_an_answer_nested_too_deeply_is_invalid() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json_leniently("[" * 100_000 + "]" * 100_000)
