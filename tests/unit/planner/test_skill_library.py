"""The skill library: the best skill of a name is kept on disk and retrieved by text similarity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.planner.prompts import PROMPT_DIR, render
from services.planner.skill_library import LibrarySkill, SkillLibrary


def skill(name: str, description: str, rate: float, task: str = "") -> LibrarySkill:
    return LibrarySkill(name=name, description=description, code=f"def skill(agent):  # {name}\n    yield 'do'\n",
                        success_rate=rate, task=task or name)


def test_a_skill_is_replaced_only_by_a_better_one(tmp_path: Path) -> None:
    library = SkillLibrary(tmp_path / "library.json")
    assert library.add(skill("collect_wood", "chop a tree", 0.6))
    assert not library.add(skill("collect_wood", "equal", 0.6))
    assert not library.add(skill("collect_wood", "worse", 0.4))
    assert library.add(skill("collect_wood", "better", 0.9))
    assert [(s.name, s.description) for s in library.all()] == [("collect_wood", "better")]


def test_the_library_persists_and_creates_its_directory(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "library.json"
    library = SkillLibrary(path)
    assert not path.exists()  # nothing written until a skill is added
    library.add(skill("collect_wood", "chop a tree", 0.6))
    library.add(skill("drink_water", "walk to water and drink", 1.0, task="collect_drink"))
    assert sorted(p.name for p in path.parent.iterdir()) == ["library.json"]
    reloaded = SkillLibrary(path)
    assert {s.name: s for s in reloaded.all()} == {s.name: s for s in library.all()}
    assert reloaded.all()[1].task == "collect_drink"


@pytest.mark.parametrize("text", ["{oops", json.dumps([{"name": "x"}]), json.dumps([{"name": "x", "bogus": 1}])])
def test_a_corrupt_library_is_refused_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "library.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"skill library .*library.json is corrupt"):
        SkillLibrary(path)


def test_retrieve_ranks_by_similarity_then_success_and_leaves_out_unrelated(tmp_path: Path) -> None:
    library = SkillLibrary(tmp_path / "library.json")
    library.add(skill("collect_wood", "chop trees for wood", 0.5))
    library.add(skill("gather_logs", "collect wood from trees", 0.9, task="collect_wood"))
    library.add(skill("drink_water", "walk to water and drink", 1.0, task="collect_drink"))
    library.add(skill("place_table", "put a table near trees", 1.0))
    found = [s.name for s in library.retrieve("get_wood")]
    assert found[:2] == ["collect_wood", "gather_logs"]  # "get_wood" is read as the words "get" and "wood"
    assert "drink_water" not in found and "place_table" not in found  # no word in common
    assert "drink_water" in [s.name for s in library.retrieve("collect_wood")]  # "collect" is in its task
    assert [s.name for s in library.retrieve("water", k=5)] == ["drink_water"]
    assert len(library.retrieve("trees wood table", k=2)) == 2
    assert library.retrieve("diamond") == []


def test_equally_similar_skills_come_best_first(tmp_path: Path) -> None:
    library = SkillLibrary(tmp_path / "library.json")
    library.add(skill("wood_a", "wood", 0.3, task="x"))
    library.add(skill("wood_b", "wood", 0.8, task="x"))
    assert [s.name for s in library.retrieve("wood x")] == ["wood_b", "wood_a"]


def test_library_retrieval_and_prompts_name_their_example_tasks(tmp_path) -> None:
    library = SkillLibrary(tmp_path / "lib.json")
    library.add(LibrarySkill("collect_wood", "chop trees for wood", "x", 0.9, "collect_wood"))
    library.add(LibrarySkill("drink_water", "walk to water and drink", "x", 1.0, "collect_drink"))
    assert library.retrieve("get some wood from trees")[0].name == "collect_wood"
    assert not library.add(LibrarySkill("collect_wood", "worse", "y", 0.5, "collect_wood"))
    assert SkillLibrary(tmp_path / "lib.json").all()[0].description == "chop trees for wood"  # persisted
    for path in PROMPT_DIR.glob("*.txt"):
        assert "covers" in path.read_text().splitlines()[0], path
    with pytest.raises(KeyError, match="needs fields"):
        render("slow_agent", task="x")
