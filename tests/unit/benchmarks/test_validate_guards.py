"""bench-validate's guards file: read into the env server's Guard messages and the skills' code; a file that is not
one, or that says not who wrote the guards, refused with what to give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from benchmarks.bench_validate import read_guards
from rlgpt.v1 import common_pb2

GUARD = {"name": "drink_when_dry", "code": "def skill(agent):\n    yield 'do'\n", "max_frames": 120,
         "when": [{"label": "status/drink", "value": 3}, {"label": "world/daylight", "value": 0.4}]}


def test_a_guards_file_becomes_guards_and_their_code(tmp_path: Path) -> None:
    path = tmp_path / "guards.json"
    path.write_text(json.dumps({"written_by": "a helper", "guards": [GUARD]}))
    doc, guards, code = read_guards(path)
    assert doc["written_by"] == "a helper" and code == {"drink_when_dry": GUARD["code"]}
    assert guards == [common_pb2.Guard(skill="drink_when_dry", max_frames=120, when=[
        common_pb2.Threshold(label="status/drink", value=3), common_pb2.Threshold(label="world/daylight", value=0.4)])]


@pytest.mark.parametrize("content, said", [
    ("not json", "give a JSON object with 'written_by' and 'guards'"),
    (json.dumps({"written_by": "x", "guards": [{"name": "g"}]}), "no 'max_frames' in it"),
    (json.dumps({"guards": [GUARD]}), "say who wrote the guards ('written_by') and give at least one"),
    (json.dumps({"written_by": "x", "guards": []}), "say who wrote the guards"),
])
def test_a_bad_guards_file_is_refused_with_what_to_give(tmp_path: Path, content: str, said: str) -> None:
    path = tmp_path / "guards.json"
    path.write_text(content)
    with pytest.raises(typer.BadParameter, match=said.replace("(", r"\(").replace(")", r"\)")):
        read_guards(path)
