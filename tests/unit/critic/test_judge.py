"""The critic's deterministic checks on hand-made episodes and curves, and its LLM verdicts (test double)."""

from __future__ import annotations

import base64
import json

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import CriticSettings, LLMSettings
from rlgpt.llm import LLMClient
from rlgpt.llm.client import record_from_json, record_json
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2
from services.critic.judge import (
    PROMPT_DIR,
    CriticAnswer,
    Judge,
    deterministic_checks,
    prerequisite_words,
    render,
    required_tools,
    shorten,
)

SETTINGS = CriticSettings()
LLM_SETTINGS = LLMSettings(max_retries=0, backoff_seconds=0.01, timeout_seconds=5, model="local")
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
WOOD = [common_pb2.Condition(achievement="collect_wood")]


def episode(success: bool = False, **fields) -> common_pb2.EpisodeSummary:
    defaults = {"steps": 100, "end_reason": "success" if success else "time_limit", "text": "noop x3\nend: ..."}
    return common_pb2.EpisodeSummary(success=success, **{**defaults, **fields})


def request(**fields) -> critic_pb2.JudgeRequest:
    return critic_pb2.JudgeRequest(**{"subtask": "get_wood", "description": "collect wood", "success": WOOD,
                                      "decision": "code", **fields})


def curve(rates, returns=None) -> list[critic_pb2.CurvePoint]:
    returns = returns or [0.0] * len(rates)
    return [critic_pb2.CurvePoint(env_frames=1000 * (i + 1), success_rate=r, mean_return=m)
            for i, (r, m) in enumerate(zip(rates, returns, strict=True))]


def has(findings: list[str], prefix: str) -> str:
    match = [f for f in findings if f.startswith(prefix)]
    assert match, (prefix, findings)
    return match[0]


def test_success_rate_against_the_threshold() -> None:
    ok = deterministic_checks(request(rollouts=[episode(True, achievements=["collect_wood"])] * 4 + [episode()]))
    assert ok.success_rate == pytest.approx(0.8) and ok.success and ok.target == critic_pb2.TARGET_KEEP
    assert has(ok.findings, "success_rate") == "success_rate 0.80 >= threshold 0.80 (4/5 episodes)"
    low = deterministic_checks(request(rollouts=[episode(True), episode(), episode(), episode()]))
    assert low.success_rate == 0.25 and not low.success
    assert low.target == critic_pb2.TARGET_FAST and not low.decisive  # low success on a coded attempt


def test_exceptions_and_timeouts_name_their_lines() -> None:
    error = common_pb2.SkillError(type="ZeroDivisionError", message="division by zero", line=3,
                                  code_line="return 1 / 0")
    found = deterministic_checks(request(
        rollouts=[episode(error=error, end_reason="error"), episode(error=error, end_reason="error")],
        errors=[common_pb2.SkillError(type="Timeout", message="no action within 2.0 s", line=5)]))
    assert has(found.findings, "exception") == \
        "exception ZeroDivisionError line 3: division by zero (`return 1 / 0`) [x2]"
    assert has(found.findings, "timeout Timeout line 5")
    assert found.target == critic_pb2.TARGET_FAST and found.decisive
    assert "line 3" in found.diagnosis and found.suggestion


def test_dead_loop_from_the_text_trajectory() -> None:
    looping = episode(text="move_left x3\nstep 4: +1 sapling\nmove_left x57\nend: time_limit at step 300, near tree",
                      achievements=["collect_sapling"])
    chopping = episode(text="do x5\nstep 6: +1 wood\nend: success", success=True, achievements=["collect_wood"])
    found = deterministic_checks(request(rollouts=[looping, chopping]))
    assert has(found.findings, "dead_loop") == "dead_loop: move_left x57 with no inventory change (1/2 episodes)"
    # The run's last action caused the change, so 24 repeats changed nothing: under the threshold of 25.
    slow_chop = episode(text="do x25\nstep 30: +1 wood\nend: success", success=True, achievements=["collect_wood"])
    quiet = deterministic_checks(request(rollouts=[slow_chop]), CriticSettings(dead_loop_repeats=25))
    assert not [f for f in quiet.findings if f.startswith("dead_loop")]
    assert has(deterministic_checks(request(rollouts=[slow_chop]), CriticSettings(dead_loop_repeats=24)).findings,
               "dead_loop: do x24")
    idle = deterministic_checks(request(rollouts=[episode(), episode(True)]))
    assert has(idle.findings, "dead_loop") == "dead_loop: 1/2 episodes hit the time limit with no achievement"


def test_death_causes_are_counted() -> None:
    rollouts = [episode(death_cause="zombie", end_reason="death")] * 3 + [
        episode(death_cause="lava", end_reason="death"), episode(True)]
    found = deterministic_checks(request(rollouts=rollouts, decision="rl"))
    assert has(found.findings, "deaths") == "deaths: zombie x3, lava x1 (4/5 episodes)"
    assert "zombie" in found.suggestion


def test_flat_curve_at_zero_goes_to_the_slow_agent() -> None:
    flat = deterministic_checks(request(decision="rl", curve=curve([0.3, 0.0, 0.0, 0.0, 0.0, 0.0],
                                                                   [5.0, 1.0, 1.01, 0.99, 1.0, 1.0])))
    assert has(flat.findings, "flat_curve").startswith("flat_curve: last 5 points (to 6000 frames)")
    assert flat.target == critic_pb2.TARGET_SLOW and flat.decisive
    assert has(flat.findings, "no_rollouts")  # the rate then comes from the curve
    rising = deterministic_checks(request(decision="rl", curve=curve([0.0, 0.1, 0.2, 0.3, 0.4])))
    assert not [f for f in rising.findings if f.startswith("flat_curve")]
    assert rising.success_rate == pytest.approx(0.4) and rising.target == critic_pb2.TARGET_FAST
    short = deterministic_checks(request(decision="rl", curve=curve([0.0, 0.0, 0.0])))
    assert not [f for f in short.findings if f.startswith("flat_curve")]


def test_no_rollouts_at_all() -> None:
    found = deterministic_checks(request(), CriticSettings(success_threshold=0.0))
    assert found.success_rate == 0 and not found.success and found.episodes == 0
    assert has(found.findings, "no_rollouts")
    assert found.target == critic_pb2.TARGET_FAST


@pytest.fixture(scope="module")
def rules(env_server) -> common_pb2.WorldRules:
    """The game's rules as a real env server serves them (the planner passes them on in JudgeRequest.rules)."""
    return env_server.stub.Describe(env_pb2.DescribeRequest()).rules


def test_missing_prerequisite_goes_to_the_slow_agent(rules) -> None:
    stone = [common_pb2.Condition(achievement="collect_stone")]
    no_pickaxe = episode(final_inventory=[common_pb2.ItemCount(item="wood", count=3)], achievements=["collect_wood"])
    found = deterministic_checks(request(subtask="get_stone", success=stone, rollouts=[no_pickaxe] * 2, rules=rules))
    assert has(found.findings, "missing_prerequisite wood_pickaxe")
    assert found.target == critic_pb2.TARGET_SLOW and "wood_pickaxe" in found.suggestion
    held = episode(final_inventory=[common_pb2.ItemCount(item="wood_pickaxe", count=1)])
    assert deterministic_checks(request(success=stone, rollouts=[held], rules=rules)).target == critic_pb2.TARGET_FAST
    made = episode(achievements=["make_wood_pickaxe"])  # made (and maybe lost) during the episode: it was held
    assert deterministic_checks(request(success=stone, rollouts=[made], rules=rules)).target == critic_pb2.TARGET_FAST
    said = common_pb2.SkillError(type="RuntimeError", message="this needs a stone_pickaxe", line=2)
    found = deterministic_checks(request(rollouts=[episode(error=said)], rules=rules))
    assert has(found.findings, "missing_prerequisite stone_pickaxe")
    assert found.target == critic_pb2.TARGET_SLOW  # before the exception's FAST


def test_prerequisites_come_from_the_rules_in_the_request(rules) -> None:
    furnace = [common_pb2.Condition(achievement="place_furnace")]
    idle = episode(final_inventory=[common_pb2.ItemCount(item="wood", count=5)])
    # The rules: a furnace uses stone, stone needs a wood_pickaxe held.
    [place] = [r for r in rules.place if r.achievement == "place_furnace"]
    [stone_rule] = [r for r in rules.collect if r.material == "stone"]
    assert [u.item for u in place.uses] == ["stone"] and [h.item for h in stone_rule.requires] == ["wood_pickaxe"]
    found = deterministic_checks(request(success=furnace, rollouts=[idle] * 2, rules=rules))
    assert has(found.findings, "missing_prerequisite wood_pickaxe") and found.target == critic_pb2.TARGET_SLOW
    # Started with the stone it uses: no pickaxe needed, so the failure is the code's.
    enough = [common_pb2.ItemCount(item="stone", count=place.uses[0].count)]
    found = deterministic_checks(request(success=furnace, rollouts=[idle] * 2, rules=rules, start_inventory=enough))
    assert not [f for f in found.findings if f.startswith("missing_prerequisite")]
    assert found.target == critic_pb2.TARGET_FAST
    # Without rules nothing is assumed: no hand-typed tech tree.
    bare = deterministic_checks(request(success=furnace, rollouts=[idle] * 2))
    assert not [f for f in bare.findings if f.startswith("missing_prerequisite")]
    # Names a text can lack are the rules' tools, made and placed things, nearby stations.
    words = prerequisite_words(rules)
    assert {"wood_pickaxe", "table", "furnace", "iron_sword"} <= set(words) and "tree" not in words
    assert required_tools(rules, "make_iron_pickaxe", {}) == ["wood_pickaxe", "stone_pickaxe"]


def llm(server: FakeOpenAIServer, tmp_path) -> LLMClient:
    return LLMClient(LLM_SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm")


ANSWER = {"success": False, "diagnosis": "The skill walks left forever.", "suggestion": "Explore, then chop.",
          "target": "slow"}


def test_llm_verdict(tmp_path) -> None:
    req = request(rollouts=[episode(text="move_left x40\nend: time_limit"), episode(True)], code="def skill(a):\n")
    with FakeOpenAIServer([Reply.json(ANSWER)]) as server:
        verdict = Judge(SETTINGS, llm(server, tmp_path)).judge(req)
    assert verdict.diagnosis == ANSWER["diagnosis"] and verdict.suggestion == ANSWER["suggestion"]
    assert verdict.success_rate == 0.5 and not verdict.success
    assert verdict.target == critic_pb2.TARGET_SLOW  # the checks left the choice open
    prompt = server.requests[0]["messages"][0]["content"]
    assert "get_wood" in prompt and "achievement collect_wood" in prompt and "move_left x40" in prompt
    assert "  1 | def skill(a):" in prompt and "dead_loop" in prompt
    assert server.requests[0]["response_format"]["json_schema"]["name"] == "CriticAnswer"
    assert not any(f.startswith("llm_") for f in verdict.findings)


def test_llm_cannot_override_numbers_or_a_decisive_target(tmp_path) -> None:
    error = common_pb2.SkillError(type="KeyError", message="'tree'", line=2)
    req = request(rollouts=[episode(error=error)] * 3)
    with FakeOpenAIServer([Reply.json({**ANSWER, "success": True})]) as server:
        verdict = Judge(SETTINGS, llm(server, tmp_path)).judge(req)
    assert verdict.success_rate == 0 and not verdict.success
    assert has(list(verdict.findings), "llm_disagrees")
    assert verdict.target == critic_pb2.TARGET_FAST and has(list(verdict.findings), "llm_target_overruled")


def test_llm_failing_falls_back_to_the_checks(tmp_path) -> None:
    req = request(rollouts=[episode(death_cause="zombie", end_reason="death")])
    with FakeOpenAIServer([Reply(status=500)]) as server:
        verdict = Judge(SETTINGS, llm(server, tmp_path)).judge(req)
    assert len(server.requests) == 1  # max_retries=0
    assert has(list(verdict.findings), "llm_unavailable: Unavailable")
    assert "zombie" in verdict.diagnosis and verdict.suggestion
    assert verdict.target == critic_pb2.TARGET_FAST and verdict.success_rate == 0
    with FakeOpenAIServer([Reply(text="not json")]) as server:
        verdict = Judge(SETTINGS, llm(server, tmp_path)).judge(req)
    assert has(list(verdict.findings), "llm_unavailable: StructuredOutputError")


def test_frames_go_as_image_parts_only_when_allowed(tmp_path) -> None:
    req = request(rollouts=[episode()], frames=[PNG, PNG])
    with FakeOpenAIServer([Reply.json(ANSWER)]) as server:
        Judge(SETTINGS, llm(server, tmp_path)).judge(req)
        Judge(CriticSettings(attach_frames=True), llm(server, tmp_path)).judge(req)
    assert isinstance(server.requests[0]["messages"][0]["content"], str)
    parts = server.requests[1]["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url"]
    assert parts[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


def test_the_llm_call_comes_back_as_a_record_without_its_images(tmp_path) -> None:
    req = request(rollouts=[episode()], frames=[PNG])
    with FakeOpenAIServer([Reply.json(ANSWER), Reply(status=500)]) as server:
        judge = Judge(CriticSettings(attach_frames=True), llm(server, tmp_path))
        verdict, record = judge.judge_with_record(req)
        assert record is not None and record.agent == "critic" and record.completion_tokens == 7
        assert verdict.diagnosis == ANSWER["diagnosis"]
        text = record_json(record)
        assert "base64" not in text and "(image left out of the record)" in text
        again = record_from_json(text)
        assert again.parsed == record.parsed and again.prompt_tokens == record.prompt_tokens
        _, failed = judge.judge_with_record(req)  # the LLM fails: no record, the checks' verdict
        assert failed is None
    with pytest.raises(ValueError, match="not an LLM call record"):
        record_from_json('{"agent": "critic"}')


def test_keep_is_an_answer_only_where_the_attempt_passed(tmp_path) -> None:
    passed = request(rollouts=[episode(True, achievements=["collect_wood"])] * 4)
    failed = request(rollouts=[episode(True), episode(), episode(), episode()])  # 25%: not decisive
    with FakeOpenAIServer([Reply.json({**ANSWER, "success": True, "target": "keep"}),
                           Reply.json({**ANSWER, "success": True, "target": "keep"}),
                           Reply.json({**ANSWER, "target": "fast"})]) as server:
        judge = Judge(SETTINGS, llm(server, tmp_path))
        kept = judge.judge(passed)
        assert kept.success and kept.target == critic_pb2.TARGET_KEEP and not any(
            f.startswith("llm_target_overruled") for f in kept.findings)
        wrong = judge.judge(failed)  # "keep" for a failing attempt: the checks' target stands
        assert not wrong.success and wrong.target == critic_pb2.TARGET_FAST
        assert has(list(wrong.findings), "llm_target_overruled: the LLM chose keep")
        revise = judge.judge(passed)  # a passed attempt is kept whatever the LLM says
        assert revise.target == critic_pb2.TARGET_KEEP and has(list(revise.findings), "llm_target_overruled")
    assert '"keep"' in json.dumps(CriticAnswer.model_json_schema())


def test_long_prose_is_shortened_at_a_sentence_never_mid_word() -> None:
    text = "The skill walks left. " * 40 + "Then it stops."
    long = CriticAnswer.model_validate({**ANSWER, "diagnosis": text})
    assert len(long.diagnosis) <= 600 and long.diagnosis.endswith("The skill walks left. ...")
    assert shorten("one two three four five", 12) == "one two ..."
    assert shorten("short", 12) == "short"
    error = common_pb2.SkillError(type="ValueError", message="bad value " * 40, line=2)
    found = deterministic_checks(request(rollouts=[episode(error=error)]))
    assert "bad value bad value" in found.diagnosis and "bad valu." not in found.diagnosis


def test_answer_schema_and_prompt() -> None:
    long = CriticAnswer.model_validate({**ANSWER, "diagnosis": "x" * 2000})
    assert len(long.diagnosis) <= 600  # shortened, not rejected
    schema = json.dumps(CriticAnswer.model_json_schema())
    assert '"maxLength": 600' in schema and '"slow"' in schema
    assert "covers" in (PROMPT_DIR / "critic.txt").read_text().splitlines()[0]
    with pytest.raises(KeyError, match="needs fields"):
        render("critic", subtask="x")
