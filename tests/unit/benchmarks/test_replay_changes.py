"""What changed in a drifted record's prompts: every matched call diffed line by line, a changed line cut to the
words that differ, each distinct change kept once with the calls showing it, and known edits named in words."""

from __future__ import annotations

from typing import Any

from benchmarks.replay.causes import cause, named_causes, other_text
from benchmarks.replay.changes import MAX_CHANGES, line_changes, prompt_changes


def call(agent: str, prompt: str, name: str) -> dict[str, Any]:
    return {"agent": agent, "messages": [{"role": "user", "content": prompt}], "_file": name}


RULES = "Rules:\nasleep, the player wakes up once energy is back.\nAnswer with one JSON object only."
NOW = ('Rules:\nasleep, every action acts as "sleep" until it wakes: the player wakes up once energy is back.\n'
       "Answer with one JSON object only; its limits: code 10 to 8,000 characters.")


def test_a_changed_line_is_cut_to_the_words_that_differ_and_whole_lines_are_added_or_removed() -> None:
    changes = line_changes("a\nkeep this line\nold line\n\nb", "a\nkeep this line, now longer\nb\nnew line")
    assert changes == [("keep this line", "keep this line, now longer"), ("old line", ""), ("", "new line")]
    long_old = "w " * 40 + "end."
    removed, added = line_changes(long_old, long_old.replace("end.", "the end."))[0]
    assert removed.startswith("…") and added.endswith("the end.") and len(added) < 40


def test_each_distinct_change_is_kept_once_with_its_agents_and_calls() -> None:
    recorded = [call("slow", RULES, "00001-iter0-plan-slow.json"), call("fast", RULES, "00002-iter0-a-fast.json"),
                call("fast", RULES, "00003-iter0-b-fast.json")]
    now = [call("slow", NOW, "00001-iter0-plan-slow.json"), call("fast", NOW, "00002-iter0-a-fast.json")]
    result = prompt_changes(recorded, now)
    assert result["changes_left_out"] == 0 and len(result["changes"]) == 2
    sleep, limits = result["changes"]
    assert sleep["agents"] == ["slow", "fast"] and sleep["calls"] == 2  # the call not made is not compared
    assert 'every action acts as "sleep"' in sleep["added"] and "its limits:" in limits["added"]


def test_changes_beyond_the_limit_are_counted_not_kept() -> None:
    lines = "\n".join(f"line {i}" for i in range(MAX_CHANGES + 5))
    result = prompt_changes([call("critic", lines, "00001-critic.json")], [call("critic", "", "00001-critic.json")])
    assert len(result["changes"]) == MAX_CHANGES and result["changes_left_out"] == 5


def test_known_edits_are_named_in_words_and_other_changes_quoted() -> None:
    changes = [{"removed": "…one JSON object only.", "added": "…one JSON object only; its limits: code…", "calls": 3,
                "agents": ["fast"]},
               {"removed": "", "added": "- Giving up on purpose: `raise ValueError(...)` ends the skill;", "calls": 2,
                "agents": ["fast"]},
               {"removed": "Measured success rate: 1.00", "added": "Measured success rate: 0.75", "calls": 1,
                "agents": ["critic"]}]
    assert "schema's limits" in cause(changes[0]) and cause(changes[2]) == ""
    named, other = named_causes(changes)
    assert list(named.values()) == [3, 2] and other == [changes[2]]
    assert other_text(other[0]) == "'Measured success rate: 1.00' -> 'Measured success rate: 0.75'"
