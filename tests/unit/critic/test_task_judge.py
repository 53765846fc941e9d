"""The whole task's verdict with an LLM (an in-process test double): its texts, the target and link it may choose
where the rules leave them open, links it may not invent, and the checks' verdict when it fails; then the edge's
validation of a JudgeTaskRequest."""

from __future__ import annotations

import math

import pytest
from critic_samples import episode, has, link, task_request
from kept_plan_support import ScriptedLLM

from rlgpt.errors import InvalidArgument
from rlgpt.v1 import critic_pb2
from services.critic.servicer import CriticServicer
from services.critic.settings import CriticSettings
from services.critic.task_checks import MAX_LINKS, task_checks
from services.critic.task_judge import AGENT, TaskJudge, TaskVerdictAnswer

SETTINGS = CriticSettings()
ANSWER = {"diagnosis": "get_a is lost in the dark.", "suggestion": "Carry light.", "target": "fast",
          "subtask": "get_a"}
FAILING = [episode(True, stages_done=[True, True])] + [episode(stages_done=[True, False])] * 3  # make_b: weakest
DYING = [episode(stages_done=[True, False], end_reason="death", death_cause="zombie")] * 3


def judged(answer: dict | None, **fields) -> tuple[critic_pb2.Verdict, ScriptedLLM]:
    llm = ScriptedLLM(answer)
    return TaskJudge(SETTINGS, llm).judge(task_request(**fields)), llm


def test_the_llm_writes_the_texts_and_may_pick_another_link() -> None:
    verdict, llm = judged(ANSWER, episodes=FAILING)
    assert (verdict.diagnosis, verdict.suggestion) == (ANSWER["diagnosis"], ANSWER["suggestion"])
    assert verdict.target == critic_pb2.TARGET_FAST and verdict.subtask == "get_a"  # the rule said make_b
    assert verdict.success_rate == 0.25 and not verdict.success
    assert "1. get_a (code)" in llm.prompts[0] and not any(f.startswith("llm_") for f in verdict.findings)


def test_a_subtask_that_is_no_link_is_ignored_with_a_finding() -> None:
    verdict, _ = judged({**ANSWER, "subtask": "get_unicorn"}, episodes=FAILING)
    assert verdict.target == critic_pb2.TARGET_FAST and verdict.subtask == "make_b"  # the weakest link
    assert has(list(verdict.findings), "llm_subtask_ignored: 'get_unicorn' is not a link of the chain")


def test_the_llm_may_send_a_death_verdict_to_the_fast_agent_or_a_link_to_the_slow_one() -> None:
    fast, _ = judged({**ANSWER, "subtask": ""}, episodes=DYING)  # rule: slow, not decisive
    assert fast.target == critic_pb2.TARGET_FAST and fast.subtask == "make_b"
    assert dict(fast.death_causes) == {"zombie": 3}
    slow, _ = judged({**ANSWER, "target": "slow"}, episodes=FAILING)
    assert slow.target == critic_pb2.TARGET_SLOW and slow.subtask == "get_a"  # the link it named, revised too


def test_decisive_rules_and_keep_stand() -> None:
    kept, _ = judged({**ANSWER, "target": "slow"}, episodes=[episode(True, stages_done=[True, True])] * 4)
    assert kept.success and kept.target == critic_pb2.TARGET_KEEP and kept.subtask == ""
    assert has(list(kept.findings), "llm_target_overruled: the LLM chose slow; the checks' rule says keep")
    unlinked, _ = judged(ANSWER, links=[], episodes=FAILING)
    assert unlinked.target == critic_pb2.TARGET_SLOW and unlinked.subtask == ""
    assert has(list(unlinked.findings), "llm_subtask_ignored") and has(list(unlinked.findings), "llm_target_overruled")
    wrong_keep, _ = judged({**ANSWER, "target": "keep"}, episodes=FAILING)
    assert wrong_keep.target == critic_pb2.TARGET_FAST and wrong_keep.subtask == "make_b"
    held = [link("get_a", 4, 4), link("make_b", 4, 4)]  # rule 5: no link loses; fast has no link to go to
    nowhere, _ = judged({**ANSWER, "subtask": ""}, links=held, episodes=[episode(stages_done=[True, True])] * 4)
    assert nowhere.target == critic_pb2.TARGET_SLOW and has(list(nowhere.findings), "llm_target_overruled")


def test_a_failing_llm_leaves_the_checks_verdict() -> None:
    verdict, llm = judged(None, episodes=DYING)
    checks = task_checks(task_request(episodes=DYING), SETTINGS)
    assert (verdict.diagnosis, verdict.suggestion, verdict.target) == (checks.diagnosis, checks.suggestion,
                                                                       checks.target)
    assert has(list(verdict.findings), "llm_unavailable: StructuredOutputError") and llm.prompts
    off, none = TaskJudge(CriticSettings(use_llm=False), ScriptedLLM(ANSWER)), TaskJudge(SETTINGS)
    for judge in (off, none):
        verdict, record = judge.judge_with_record(task_request(episodes=DYING))
        assert record is None and verdict.diagnosis == checks.diagnosis
    assert off.llm.prompts == []


def test_the_answer_is_clipped_not_refused_and_the_call_has_its_own_agent() -> None:
    long = TaskVerdictAnswer.model_validate({**ANSWER, "diagnosis": "It dies. " * 400, "suggestion": "Eat. " * 300})
    assert len(long.diagnosis) <= 2000 and len(long.suggestion) <= 600
    _, record = TaskJudge(SETTINGS, ScriptedLLM(ANSWER)).judge_with_record(task_request(episodes=FAILING))
    assert record is not None and record.agent == AGENT == "critic_task"


def refused(**fields) -> str:
    """Why the critic refuses a request: its limits (checked before the servicer runs), else the servicer's check."""
    servicer = CriticServicer(CriticSettings(use_llm=False, max_rollouts=4, max_code_bytes=64))
    request = task_request(**fields)
    if problems := servicer.request_limits.problems(request):
        return "; ".join(problems)
    with pytest.raises(InvalidArgument) as info:
        servicer._validate_task(request)
    return str(info.value)


@pytest.mark.parametrize(("fields", "needle"), [
    ({"task": " "}, "task: must name the task"),
    ({"target_success": 1.5}, "target_success=1.5: must be in 0..1"),
    ({"target_success": -0.25}, "target_success=-0.25: must be in 0..1"),
    ({"target_success": math.nan}, "target_success is nan; it must be a finite number"),
    ({"iteration": -1}, "iteration=-1: must be >= 0"),
    ({"description": "x" * 65}, "description is 65 chars; the limit is 64"),
    ({"episodes": [episode()] * 5}, "episodes has 5 entries; the limit is 4"),
    ({"episodes": [episode(steps=-1)]}, "episodes[0]: steps must be >= 0"),
    ({"episodes": [episode(text="x" * 65)]}, "episodes[0].text is 65 chars; the limit is 64"),
    ({"links": [link(f"l{i}", 0, 0) for i in range(MAX_LINKS + 1)]},
     f"links has {MAX_LINKS + 1} entries; the limit is {MAX_LINKS}"),
    ({"links": [link("", 1, 0)]}, "links[0].subtask: must name"),
    ({"links": [link("get_a", 1, 0), link("get_a", 1, 0)]}, "links[1].subtask='get_a': an earlier link"),
    ({"links": [link("get_a", 1, 2)]}, "links[0]: reached=1 succeeded=2: must be 0 <= succeeded <= reached"),
    ({"links": [link("get_a", 1, 0, decision="vibes" * 20)]}, "links[0].decision='vibesvibes"),
    ({"links": [link("get_a", 1, 0, own=1.5)]}, "links[0].own_success_rate=1.5: must be in 0..1, or -1"),
    ({"score": 101.0}, "score=101: must be in 0..100 (the game's score, percent)"),
    ({"score": 5.0, "achievement_rates": {"collect_wood": 150.0}}, "achievement_rates['collect_wood']=150: must be"),
    ({"achievement_rates": {"collect_wood": 50.0}}, "achievement_rates: given without a score"),
])
def test_bad_requests_are_refused_naming_the_value_and_the_range(fields, needle) -> None:
    assert needle in refused(**fields)


def test_a_links_frames_may_be_not_known_but_not_negative() -> None:
    unknown, negative = link("get_a", 1, 0), link("get_a", 1, 0)
    unknown.mean_frames, negative.mean_frames = -1.0, -2.0
    servicer = CriticServicer(CriticSettings(use_llm=False))
    servicer._validate_task(task_request(links=[unknown]))  # an env server that did not say when stages were done
    assert "links[0].mean_frames=-2: must be >= 0, or -1 (not known)" in refused(links=[negative])


def test_a_bad_value_is_echoed_only_by_its_start() -> None:
    message = refused(links=[link("get_a", 1, 0, decision="v" * 100)])
    assert "v" * 40 in message and "v" * 41 not in message
    assert refused(links=[link("get_a", 1, 0, decision="v" * 500)]) == \
        "links[0].decision is 500 chars; the limit is 128"  # beyond the limits: only its size


def test_a_copy_of_the_prompt_is_not_taken_for_a_diagnosis() -> None:
    copied = {**ANSWER, "diagnosis": "The success rates below are measured; do not recompute them."}
    verdict, _ = judged(copied, episodes=FAILING)
    checks = task_checks(task_request(episodes=FAILING), SETTINGS)
    assert verdict.diagnosis == checks.diagnosis and verdict.subtask == "make_b"  # the LLM's link not taken either
    assert has(list(verdict.findings), "llm_copied_example: the LLM's diagnosis or suggestion is a text of the prompt")
