"""The whole task's deterministic verdict: where episodes end (the weakest link, ties), why (death causes), and
the target rule (KEEP at the target, SLOW on deaths or with no links, FAST on the weakest link)."""

from __future__ import annotations

from critic_samples import episode, has, link, task_request

from rlgpt.v1 import critic_pb2
from services.critic.settings import CriticSettings
from services.critic.task_checks import (
    AFTER_CHAIN,
    MAX_KINDS,
    MAX_TASK_TEXT,
    UNKNOWN_LINK,
    ended_in,
    failure_kinds,
    task_checks,
    weakest_link,
)

SETTINGS = CriticSettings(use_llm=False, success_threshold=0.8)


def ended(stages: list[bool], **fields) -> object:
    """A failed episode that got as far as ``stages`` say."""
    return episode(stages_done=stages, **fields)


def died(stages: list[bool], cause: str, text: str = "noop x3\nend: death") -> object:
    return episode(stages_done=stages, end_reason="death", death_cause=cause, text=text)


def test_the_weakest_link_loses_the_most_episodes_and_ties_go_to_the_earlier() -> None:
    links = [link("get_a", 10, 8), link("get_b", 8, 3), link("make_c", 3, 1)]
    assert weakest_link(links).subtask == "get_b"
    tied = [link("get_a", 10, 6), link("get_b", 6, 2), link("make_c", 2, 0)]
    assert weakest_link(tied).subtask == "get_a"  # 4, 4, 2 lost: the earlier of the two
    assert weakest_link([link("get_a", 5, 5), link("get_b", 5, 5)]) is None
    assert weakest_link([]) is None


def test_a_failed_episode_ends_in_its_first_link_not_done() -> None:
    links = [link("get_a", 1, 1), link("get_b", 1, 0)]
    assert ended_in(episode(stages_done=[True, False]), links) == "get_b"
    assert ended_in(episode(stages_done=[False, True]), links) == "get_a"  # as the planner counts "reached"
    assert ended_in(episode(stages_done=[True, True]), links) == AFTER_CHAIN
    assert ended_in(episode(), links) == UNKNOWN_LINK  # no flag per link
    assert ended_in(episode(stages_done=[True]), links) == UNKNOWN_LINK


def test_kinds_of_failure_group_by_link_and_cause_the_most_frequent_first() -> None:
    links = [link("get_a", 5, 4), link("get_b", 4, 1)]
    episodes = [ended([False, False]), died([True, False], "zombie"), episode(True, stages_done=[True, True]),
                died([True, False], "zombie"), died([True, False], "arrow"), episode(stages_done=[True, False],
                                                                                     end_reason="death")]
    kinds = failure_kinds(episodes, links)
    assert [(k.link, k.cause, k.episodes) for k in kinds] == [
        ("get_b", "died of zombie", (1, 3)), ("get_a", "time_limit", (0,)), ("get_b", "died of arrow", (4,)),
        ("get_b", "died of unknown", (5,))]


def test_death_causes_are_counted_over_failed_episodes() -> None:
    episodes = [died([True, False], "zombie")] * 12 + [died([True, False], "arrow")] * 5 + [
        ended([True, False])] * 3 + [episode(True, stages_done=[True, True], death_cause="zombie")] * 10
    found = task_checks(task_request(links=[link("get_a", 30, 30), link("make_b", 30, 10)], episodes=episodes),
                        SETTINGS)
    assert found.death_causes == {"zombie": 12, "arrow": 5}  # the successful episodes' deaths are not failures
    assert "deaths: zombie 12, arrow 5 of 20 failed episodes" in found.findings
    assert "time_limit: 3 of 20 failed episodes" in found.findings
    assert "link make_b: 30 reached, 10 succeeded (own success not measured)" in found.findings
    assert "17 of 20 failed episodes died: zombie 12, arrow 5." in found.diagnosis


def test_keep_when_the_target_is_reached() -> None:
    episodes = [episode(True, stages_done=[True, True])] * 3 + [ended([True, False])]
    found = task_checks(task_request(episodes=episodes, target_success=0.75), SETTINGS)
    assert found.success and found.success_rate == 0.75
    assert (found.target, found.decisive, found.subtask) == (critic_pb2.TARGET_KEEP, True, "")
    assert has(found.findings, "success_rate 0.75 >= target 0.75 (3/4 episodes)")
    below = task_checks(task_request(episodes=episodes, target_success=0.8), SETTINGS)
    assert not below.success and below.target == critic_pb2.TARGET_FAST
    nothing = task_checks(task_request(target_success=0.0), SETTINGS)  # no episode ran: never a success
    assert not nothing.success and has(nothing.findings, "no_episodes")


def test_fast_on_the_weakest_link_names_it_and_quotes_each_kind_of_failure() -> None:
    episodes = [episode(True, stages_done=[True, True]),
                ended([True, False], text="go x9\nmake_b x40 at (3, 4)\nend: time_limit"),
                ended([True, False]), ended([False, False], end_reason="skill_finished", text="go x2\nend: gave up")]
    found = task_checks(task_request(episodes=episodes, links=[link("get_a", 4, 3), link("make_b", 3, 1)]),
                        SETTINGS)
    assert (found.target, found.decisive, found.subtask) == (critic_pb2.TARGET_FAST, False, "make_b")
    assert "Link make_b loses the most episodes: 2 of the 3 that reached it (33% in the chain" in found.diagnosis
    assert ("[make_b, time_limit, 2 episodes] episode 1 ends: go x9 | make_b x40 at (3, 4) | end: time_limit."
            in found.diagnosis)
    assert "[get_a, skill_finished, 1 episode] episode 3 ends: go x2 | end: gave up." in found.diagnosis
    assert has(found.findings, "weakest_link make_b: lost 2 of 3")
    assert found.suggestion.startswith("Make make_b succeed where the chain hands it over: revise its skill")
    rl = task_checks(task_request(episodes=episodes, links=[link("get_a", 4, 3), link("make_b", 3, 1, decision="rl")]),
                     SETTINGS)
    assert "continue its training from its checkpoint" in rl.suggestion


def test_a_link_that_passes_its_own_tests_but_not_the_chain_is_a_handover_gap() -> None:
    links = [link("get_a", 8, 8, own=1.0), link("make_b", 8, 3, own=1.0)]
    found = task_checks(task_request(links=links, episodes=[ended([True, False])] * 5), SETTINGS)
    assert found.target == critic_pb2.TARGET_FAST and found.subtask == "make_b"
    assert has(found.findings, "handover_gap make_b: own success 100%, in the chain 38%")
    assert "its tests do not start where the chain hands over" in found.suggestion
    measured_low = [link("get_a", 8, 8), link("make_b", 8, 3, own=0.5)]
    plain = task_checks(task_request(links=measured_low, episodes=[ended([True, False])] * 5), SETTINGS)
    assert not [f for f in plain.findings if f.startswith("handover_gap")]


def test_slow_when_most_failures_are_deaths_and_the_suggestion_says_survival() -> None:
    episodes = [died([True, False], "zombie")] * 3 + [ended([True, False])] * 2
    found = task_checks(task_request(episodes=episodes), SETTINGS)
    assert (found.target, found.decisive, found.subtask) == (critic_pb2.TARGET_SLOW, False, "make_b")  # revised too
    assert found.weakest == "make_b" and "Link make_b loses the most" in found.diagnosis
    assert has(found.findings, "mostly_deaths: 3 of 5 failed episodes died")
    assert "survival sub-task or a macro action" in found.suggestion and "zombie" in found.suggestion
    half = [died([True, False], "zombie")] * 2 + [ended([True, False])] * 2  # half is not most
    assert task_checks(task_request(episodes=half), SETTINGS).target == critic_pb2.TARGET_FAST


def test_a_weakest_link_that_fails_its_own_tests_goes_to_the_fast_agent_whatever_ends_the_episodes() -> None:
    episodes = [died([True, False], "zombie")] * 3 + [ended([True, False])] * 2
    links = [link("get_a", 5, 5, own=1.0), link("make_b", 5, 0, own=0.5, decision="rl")]
    found = task_checks(task_request(links=links, episodes=episodes), SETTINGS)
    assert (found.target, found.subtask) == (critic_pb2.TARGET_FAST, "make_b")
    assert has(found.findings, "own_tests_fail make_b: own success 50% < threshold 80%")
    assert "continue or reconfigure its training first" in found.suggestion
    unmeasured = [link("get_a", 5, 5), link("make_b", 5, 0)]  # own -1: the deaths rule decides
    assert task_checks(task_request(links=unmeasured, episodes=episodes), SETTINGS).target == critic_pb2.TARGET_SLOW


def test_slow_and_decisive_without_links() -> None:
    found = task_checks(task_request(links=[], episodes=[episode(text="noop x100\nend: time_limit")] * 2), SETTINGS)
    assert (found.target, found.decisive, found.subtask) == (critic_pb2.TARGET_SLOW, True, "")
    assert has(found.findings, "no_links") and found.suggestion.startswith("No chain ran")
    assert "[link unknown, time_limit, 2 episodes]" in found.diagnosis


def test_slow_when_every_link_holds_and_the_task_still_fails() -> None:
    links = [link("get_a", 4, 4), link("make_b", 4, 4)]
    found = task_checks(task_request(links=links, episodes=[ended([True, True])] * 4), SETTINGS)
    assert (found.target, found.decisive, found.subtask) == (critic_pb2.TARGET_SLOW, False, "")
    assert has(found.findings, "links_hold") and "[after the chain, time_limit" in found.diagnosis


def test_the_diagnosis_is_bounded_and_quotes_at_most_a_few_kinds() -> None:
    long = "\n".join("word " * 60 for _ in range(50))
    causes = [f"cause_{i}" for i in range(10)]
    episodes = [died([True, False], cause, text=long) for cause in causes]
    found = task_checks(task_request(episodes=episodes), SETTINGS)
    assert len(found.diagnosis) <= MAX_TASK_TEXT and found.diagnosis.count("] episode ") <= MAX_KINDS
    assert found.diagnosis.count("] episode ") >= 2  # the quotes are short enough for several kinds


def test_the_whole_game_is_judged_by_its_score_and_names_what_holds_it_down() -> None:
    rates = {"collect_wood": 100.0, "place_table": 75.0, "eat_cow": 25.0, "collect_diamond": 0.0, "wake_up": 0.0}
    episodes = [died([True, True], "zombie")] * 3 + [ended([True, True], end_reason="time_limit")]
    below = task_checks(task_request(episodes=episodes, target_success=0.273, score=12.5, achievement_rates=rates),
                        SETTINGS)
    assert not below.success and has(below.findings, "score 12.5 < target 27.3 (4 episodes)")
    assert below.diagnosis.startswith("The whole game scored 12.5 (target 27.3). Never unlocked (2 of 5): "
                                      "collect_diamond, wake_up. Lowest rates: eat_cow 25%, place_table 75%.")
    assert below.target == critic_pb2.TARGET_SLOW and "survival" in below.suggestion  # mostly deaths
    # No episode "succeeds" in the whole game: the score alone reaches the target.
    above = task_checks(task_request(episodes=episodes, target_success=0.1, score=12.5, achievement_rates=rates),
                        SETTINGS)
    assert above.success and above.target == critic_pb2.TARGET_KEEP
