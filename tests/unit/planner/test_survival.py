"""A game task's deaths reach the slow agent (services/planner/survival.py, issue 36 item 2): the last
evaluation's deaths aggregated (how many, of which causes, where in the plan, after how many frames, the end of
one trajectory per main cause) join every re-plan's feedback of a game task, and the measured whole-task verdict
sends a game whose episodes mostly died back to the slow agent; other tasks are unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_game_measure import GAME, PLAN, game_loops

from rlgpt.v1 import common_pb2, critic_pb2, planner_pb2
from services.planner import loops as loops_module
from services.planner import survival, task_review
from services.planner.agents.slow import SlowAgent
from services.planner.controller import failed_episodes
from services.planner.skill_library import SkillLibrary
from services.planner.state import FinalResult, IterationRecord, Status


def episode(cause: str, steps: int, stages: list[bool], text: str = "") -> common_pb2.EpisodeSummary:
    return common_pb2.EpisodeSummary(death_cause=cause, end_reason="death" if cause else "time_limit", steps=steps,
                                     stages_done=stages, text=text)


EPISODES = [episode("zombie", 200, [True, False], "step 190: walk\nstep 199: hit by zombie\nstep 200: died"),
            episode("zombie", 400, [True, True]), episode("thirst", 600, [True, True], "step 600: died of thirst"),
            episode("", 10_000, [True, True])]


def test_the_deaths_are_counted_by_cause_and_place_with_a_trajectory_end(tmp_path: Path, describe) -> None:
    ctx = game_loops(tmp_path, describe).ctx
    text = survival.deaths_text(ctx, EPISODES, PLAN)
    assert text.startswith("Deaths in the whole game's last evaluation: 3 of 4 episodes ended with the player's "
                           "death, after 400 frames on average (an episode lasts up to 10000 frames); by cause: "
                           "zombie 2, thirst 1.")
    assert "Where: after every sub-task of the plan was done 2, before table was done 1." in text
    assert ("The last lines of an episode that died of zombie: step 190: walk | step 199: hit by zombie | step 200: "
            "died") in text and "died of thirst: step 600: died of thirst" in text
    assert "sub-tasks that keep the player alive" in text
    fixed = text.split("\n")[-1]  # the planner's own words name no game fact: names come from Describe
    assert not any(name in fixed for name in (*describe.achievements, *describe.items))


def test_no_death_adds_nothing(tmp_path: Path, describe) -> None:
    two = game_loops(tmp_path, describe)
    assert survival.deaths_text(two.ctx, [episode("", 10_000, [True, True])], PLAN) == ""
    assert survival.where(episode("zombie", 3, []), PLAN) == ""  # the episode does not say where


def test_another_task_is_told_its_deaths_too(tmp_path: Path, describe) -> None:
    """Issue 35 item 1: any task's failed episodes that died are counted for the re-plan, and the advice says a
    death fails the task (no achievement counts) and that renaming a sub-task has its skill written again."""
    two = game_loops(tmp_path, describe)
    two.ctx.run.request.task.CopyFrom(common_pb2.TaskSpec(name="place_table", success=PLAN.subtasks[1].success))
    text = survival.deaths_text(two.ctx, EPISODES, PLAN)
    assert text.startswith("Deaths in the whole task's last evaluation: 3 of 4 episodes ended with the player's "
                           "death")
    assert "by cause: zombie 2, thirst 1." in text and "Where: " in text
    advice = text.split("\n")[-1]
    assert advice.startswith("An episode whose player dies before the task is done fails")
    assert "rename a sub-task where it dies" in advice and "its skill is written again" in advice
    assert "achievement unlocked before death counts" not in text


def evaluated(episodes: list[common_pb2.EpisodeSummary]) -> FinalResult:
    return FinalResult(episodes=len(episodes), frames_used=0, controller="chain", successes=[False] * len(episodes),
                       episode_summaries=episodes, failed=failed_episodes(episodes), score=1.0,
                       links=[{"name": "wood", "reached": 4, "succeeded": 4},
                              {"name": "table", "reached": 4, "succeeded": 3}])


@pytest.mark.parametrize("pending", [True, False])
def test_a_game_re_plan_is_told_the_deaths(tmp_path: Path, describe, monkeypatch: pytest.MonkeyPatch,
                                           pending: bool) -> None:
    two = game_loops(tmp_path, describe, budgets=planner_pb2.Budgets(eval_episodes=4, max_outer_iterations=3))
    monkeypatch.setattr(loops_module, "iteration_evaluation", lambda ctx: evaluated(EPISODES))
    if pending:  # a sub-task that failed: the slow agent gets the plan's summary, and the deaths
        two.state.subtasks["table"].status = Status.FAILED
    two._evaluate_iteration(IterationRecord(iteration=0, tokens=0, seconds=0.0, frames=0), PLAN)
    feedback = two.state.slow_feedback
    assert "Deaths in the whole game's last evaluation: 3 of 4 episodes" in feedback
    if not pending:  # the measured verdict: most episodes died, so the slow agent re-plans; table is reopened too
        assert "3 of 4 episodes ended in the player's death: revise the plan" in feedback
        assert two.state.subtasks["table"].status == Status.PENDING
    prompt, _ = SlowAgent(None, describe, SkillLibrary(tmp_path / "lib.json")).prompt(  # type: ignore[arg-type]
        GAME, PLAN, feedback)
    assert "by cause: zombie 2, thirst 1" in prompt and "keep the player alive" in prompt


def test_the_measured_verdict_on_a_game_that_mostly_died_goes_to_the_slow_agent() -> None:
    links = [{"name": "wood", "reached": 4, "succeeded": 4}, {"name": "table", "reached": 4, "succeeded": 3}]
    died = [{"end_reason": "death", "death_cause": "zombie"}] * 3 + [{"end_reason": "time_limit"}]
    game = IterationRecord(iteration=0, tokens=0, seconds=0.0, frames=0, success_rate=0.0, links=links,
                           failed=died, score=2.0)
    verdict = task_review.measured_task_verdict(game, 0.273)
    assert verdict.target == critic_pb2.TARGET_SLOW and verdict.subtask == "table" and not verdict.success
    assert verdict.diagnosis.startswith("The whole game scored 2.0 in its evaluation (target 27.3).")
    assert verdict.suggestion == ("3 of 4 episodes ended in the player's death: revise the plan with sub-tasks that "
                                  "keep the player alive. Make table succeed where the chain hands it over.")
    game.failed = died[:1] + [{"end_reason": "time_limit"}] * 3  # most lived: the weakest link, as before
    assert task_review.measured_task_verdict(game, 0.273).target == critic_pb2.TARGET_FAST
    other = IterationRecord(iteration=0, tokens=0, seconds=0.0, frames=0, success_rate=0.0, links=links, failed=died)
    assert task_review.measured_task_verdict(other, 0.8).target == critic_pb2.TARGET_FAST  # not a game: unchanged


def test_after_deaths_the_plan_may_add_sub_tasks_that_keep_the_player_alive(tmp_path: Path, describe) -> None:
    """The deaths text invites survival sub-tasks, so the plan rules must not refuse them as side quests: with
    deaths in the feedback every achievement and item is an allowed need; without, only those the feedback names."""
    two = game_loops(tmp_path, describe)
    two.ctx.run.request.task.CopyFrom(common_pb2.TaskSpec(name="place_table", success=PLAN.subtasks[1].success))
    names = {*describe.achievements, *describe.items}
    two.state.slow_feedback = "Make collect_drink succeed."
    assert two._allowed_needs() == {"collect_drink"} & names
    two.state.slow_feedback = survival.joined("a rollback", survival.deaths_text(two.ctx, EPISODES, PLAN))
    assert survival.reported(two.state.slow_feedback)
    assert two._allowed_needs() == names
    assert not survival.reported("No deaths. Deaths in the text, not at a line's start.")
