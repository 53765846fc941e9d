"""bench-replay's prompt check: replayed calls matched to the record per agent in call order, the calls with the
recorded prompt word for word, and the first differing line, recorded vs now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.replay.drift import EXCERPT_CHARS, compare_prompts, first_difference, llm_calls
from benchmarks.replay.records import critic_asked_on_pass, recorded_entry


def call(agent: str, prompt: str, name: str = "") -> dict[str, Any]:
    return {"agent": agent, "messages": [{"role": "user", "content": prompt}], "_file": name}


def test_same_prompts_are_counted_per_agent_with_no_drift() -> None:
    calls = [call("slow", "plan it", "00001-iter0-plan-slow.json"), call("fast", "write a", "00002-iter0-a-fast.json"),
             call("critic", "judge a", "00003-iter0-a-critic.json"), call("fast", "write b", "00004-iter0-b-fast.json")]
    result = compare_prompts(calls, calls)
    assert result == {"recorded_calls": 4, "replayed_calls": 4, "same_prompt": 4, "by_agent": {
        "critic": {"recorded": 1, "replayed": 1, "same": 1}, "fast": {"recorded": 2, "replayed": 2, "same": 2},
        "slow": {"recorded": 1, "replayed": 1, "same": 1}}, "not_made": {}, "answered_elsewhere": [], "drift": None}


def test_the_first_drift_in_call_order_names_the_agent_its_call_and_the_line() -> None:
    recorded = [call("slow", "plan it", "00001-slow.json"), call("fast", "Rules:\nKeep it short.", "00002-fast.json"),
                call("fast", "Rules:\nKeep it short.\nb", "00003-fast.json")]
    now = [call("slow", "plan it", "00001-slow.json"), call("fast", "Rules:\nKeep it short; at most 60 lines.",
                                                            "00002-fast.json"),
           call("fast", "Rules:\nKeep it short.\nc", "00003-fast.json")]
    result = compare_prompts(recorded, now)
    assert result["same_prompt"] == 1 and result["replayed_calls"] == 3
    assert {a: n["same"] for a, n in result["by_agent"].items()} == {"fast": 0, "slow": 1}
    assert result["drift"] == {"agent": "fast", "call": 1, "file": "00002-fast.json", "line": 2,
                               "recorded": "Keep it short.", "now": "Keep it short; at most 60 lines."}


def test_a_skipped_call_is_not_made_and_the_calls_after_it_are_compared_with_their_own_record() -> None:
    # The record asked the critic about a and b; the replay's critic is asked about b only: it gets a's recorded
    # answer (the n-th call takes the n-th answer), and its prompt is compared with b's record.
    recorded = [call("critic", "judge a", "00001-iter0-a-critic.json"), call("critic", "judge b",
                                                                             "00002-iter0-b-critic.json")]
    now = [call("critic", "judge b", "00001-iter0-b-critic.json")]
    result = compare_prompts(recorded, now)
    assert (result["recorded_calls"], result["replayed_calls"], result["same_prompt"]) == (2, 1, 1)
    assert result["not_made"] == {"critic": 1} and result["drift"] is None
    assert result["answered_elsewhere"] == [{"call": "iter0-b-critic", "answered_with": "00001-iter0-a-critic.json"}]


def test_calls_the_replay_did_not_make_are_counted_not_compared() -> None:
    recorded = [call("slow", "p", "00001-iter0-plan-slow.json"), call("fast", "a", "00002-iter0-a-fast.json"),
                call("fast", "b", "00003-iter0-a-fast.json")]
    result = compare_prompts(recorded, recorded[:2])
    assert (result["recorded_calls"], result["replayed_calls"], result["same_prompt"]) == (3, 2, 2)
    assert result["not_made"] == {"fast": 1} and result["drift"] is None and result["answered_elsewhere"] == []


def test_a_record_whose_critic_judged_passed_attempts_is_replayed_with_it_asked_then() -> None:
    passed = call("critic", "Checks:\n- success_rate 1.00 >= threshold 0.80 (4/4 episodes)")
    failed = call("critic", "Checks:\n- success_rate 0.50 < threshold 0.80 (2/4 episodes)")
    assert critic_asked_on_pass([call("slow", "p"), passed]) and not critic_asked_on_pass([failed])


def test_a_long_line_is_quoted_around_where_it_differs() -> None:
    head = "x" * 500
    difference = first_difference(head + "old tail", head + "new tail")
    assert difference is not None and difference["line"] == 1
    assert difference["recorded"].startswith("…") and "old tail" in difference["recorded"]
    assert "new tail" in difference["now"] and len(difference["now"]) <= EXCERPT_CHARS + 2
    assert first_difference("a\nb", "a\nb\nc") == {"line": 3, "recorded": "", "now": "c"}
    assert first_difference("same", "same") is None


def test_an_old_records_wall_time_gets_its_first_call_back(tmp_path: Path) -> None:
    source = tmp_path / "kept"
    (source / "llm").mkdir(parents=True)
    (source / "request.json").write_text(json.dumps({"task": {"name": "collect_wood"}}))
    (source / "state.json").write_text(json.dumps({"final": {"success_rate": 1.0}, "frames_used": 9}))
    first_call = call("slow", "p") | {"latency_seconds": 60.1}
    (source / "llm" / "00001-iter0-plan-slow.json").write_text(json.dumps(first_call))
    (source / "recorded.json").write_text(json.dumps({"wall_seconds": 89.3, "model": "m"}))
    entry = recorded_entry(source)
    assert entry["wall_seconds"] == 149.4 and entry["llm_calls"] == 1 and entry["success_rate"] == 1.0
    assert llm_calls(source / "llm")[0]["_file"] == "00001-iter0-plan-slow.json"
