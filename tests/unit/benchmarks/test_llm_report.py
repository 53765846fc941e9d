"""bench-llm counts dead loops with the critic's own check and reports them per model, from the saved results."""

from __future__ import annotations

from typing import Any

from benchmarks.llm.dead_loops import critic_repeats, episode_loops
from benchmarks.llm.report import TITLE, comparison_sentence, loop_cell, model_sentence, render
from rlgpt.v1 import common_pb2
from services.critic.settings import CriticSettings


def episode(text: str, end_reason: str = "skill_returned", success: bool = False,
            achievements: tuple[str, ...] = ()) -> common_pb2.EpisodeSummary:
    return common_pb2.EpisodeSummary(text=text, end_reason=end_reason, success=success,
                                     achievements=list(achievements))


def test_dead_loop_episodes_are_what_the_critics_check_flags() -> None:
    episodes = [
        episode("move_left x3\ndo x30 at (3, 4), facing tree", end_reason="skill_returned"),  # do repeated
        episode("noop x12\nmove_up x5", end_reason="time_limit"),  # ran out of time with nothing unlocked
        episode("move_left x5\nstep 6 at (1, 2): +1 wood", end_reason="skill_returned", success=True,
                achievements=("collect_wood",)),
        episode("do x19", end_reason="skill_returned"),  # below the repeats
    ]
    assert episode_loops(episodes, repeats=20) == {
        "episodes": 4, "dead_loop_episodes": 2, "loops": [{"action": "do", "count": 30}], "idle_episodes": 1}
    assert episode_loops([], repeats=20) == {"episodes": 0, "dead_loop_episodes": 0, "loops": [],
                                             "idle_episodes": 0}
    assert critic_repeats() == CriticSettings.load().dead_loop_repeats


def model(name: str, episodes: int | None, loops: int = 0, rows: list[dict[str, Any]] | None = None,
          idle: int = 0) -> dict[str, Any]:
    m = {"model": name, "package": f"pkg-{name}", "valid_plan_rate": 1.0, "skill_json_rate": 0.5,
         "skill_compiles_rate": 0.5, "skill_passes_rate": 0.25, "completion_tokens_per_second": 12.0,
         "slow_seconds_per_call": 5.0, "fast_seconds_per_call": 6.0, "rows": rows or []}
    if episodes is not None:
        m.update(test_episodes=episodes, dead_loop_episodes=loops, dead_loop_idle_episodes=idle)
    return m


ROWS = [{"subtask": "collect_wood", "loops": [{"action": "do", "count": 40}], "skill_error": ""},
        {"subtask": "collect_stone", "loops": [{"action": "do", "count": 25}, {"action": "noop", "count": 180}],
         "skill_error": "Timeout: the skill ran past its step budget"}]


def test_the_column_and_the_sentences_follow_the_numbers() -> None:
    looping = model("big", 8, loops=4, rows=ROWS, idle=1)
    assert loop_cell(looping) == "4/8 (50%)"
    assert loop_cell(model("none-ran", 0)) == "0/0"
    assert loop_cell(model("old", None)) == "-"
    assert model_sentence(looping) == (
        "`big`: 4 of 8 test episodes (50%) were dead loops; repeated actions: `do` (2 episodes), `noop` (1 episode); "
        "longest: `noop` x180 in collect_stone; 1 only ran out of time with nothing unlocked.")
    assert model_sentence(model("none-ran", 0)) == (
        "`none-ran`: no skill passed the sandbox, so none ran a test episode and there is no dead-loop rate to "
        "measure.")
    assert model_sentence(model("clean", 6)) == "`clean`: none of its 6 test episodes was a dead loop."
    assert comparison_sentence([looping, model("clean", 6), model("none-ran", 0)]) == (
        "Lowest dead-loop rate: `clean` (0%).")
    assert comparison_sentence([model("a", 4, loops=1), model("b", 8, loops=2), model("c", 4, loops=3)]) == (
        "Lowest dead-loop rate: `a` and `b` (25%) (a tie).")
    assert comparison_sentence([model("a", 4, loops=1), model("b", 8, loops=2)]) == (
        "The models whose skills ran episodes tied at a dead-loop rate of 25%.")
    assert comparison_sentence([looping, model("none-ran", 0)]) == ""  # one model measured: nothing to compare


def test_section_from_results() -> None:
    results = {"date_utc": "2026-01-01 00:00 UTC", "machine": "Test CPU, 2 cores", "episodes": 2, "steps": 200,
               "dead_loop_repeats": 20, "subtasks": ["collect_wood", "collect_stone"],
               "models": [model("big", 8, loops=4, rows=ROWS, idle=1), model("small", 0)]}
    section = render(results)
    assert section.startswith(TITLE)
    assert "| dead-loop episodes |" in section.splitlines()[4]
    assert "| big (pkg-big) | python | 100% | - | - | 50% | 50% | 25% | - | 4/8 (50%) | 12.0 | 5.0 | 6.0 |" in section
    assert "| small (pkg-small) | python | 100% | - | - | 50% | 50% | 25% | - | 0/0 | 12.0 | 5.0 | 6.0 |" in section
    assert "repeated 20 times or more" in section and "`big`: 4 of 8 test episodes (50%)" in section
    assert "Typical skill errors of big: collect_stone: Timeout" in section


def test_results_saved_before_the_dead_loop_count_still_render() -> None:
    """The old results.json: a bare list of models without dead-loop fields."""
    section = render([model("old", None, rows=ROWS)])
    assert "| old (pkg-old) | python | 100% | - | - | 50% | 50% | 25% | - | - | 12.0 | 5.0 | 6.0 |" in section
    assert "Dead-loop episodes:" not in section and "date and machine not recorded" in section


def test_programs_plans_against_the_rules_and_copies_are_columns() -> None:
    measured = {**model("tiny", 4, rows=[{**row, "skill_passes": i == 0} for i, row in enumerate(ROWS)]),
                "skill_format": "program", "plan_rules_rate": 0.5, "plan_copy_rate": 1.0, "skill_copy_rate": 0.0}
    section = render({"models": [measured]})
    assert "| tiny (pkg-tiny) | program | 100% | 50% | 100% | 50% | 50% | 1/2 (25%) | 0% | 0/4 (0%) |" in section
    assert "appears word for word in its prompt template" in section
