"""A task whose objective is the game itself (services/planner/game_task.py): its evaluations play the task's own
episodes and are measured by the game's score (rlgpt/game_score.py) and the achievements' rates, counted toward the
frame budget, which keeps the evaluations still due; its target is a score; its budget defaults to the game's and
must cover one evaluation; the best controller is the one that scores higher; the report shows the score and the
rates; the slow agent is asked for a curriculum."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from rlgpt.game_score import crafter_score, success_rates
from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner import game_task, task_review
from services.planner.agents.slow import GAME_OBJECTIVE, GOAL_OBJECTIVE, SlowAgent
from services.planner.budgets import evaluation_problems, resolve_budgets
from services.planner.context import Stubs
from services.planner.controller import evaluate_chain
from services.planner.iteration_costs import begin_iteration
from services.planner.loops import TwoLoops
from services.planner.prompts import EvalProtocol
from services.planner.report import write_run_report
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import IterationRecord, RunState, Status

GAME = common_pb2.TaskSpec(name="crafter", description="the whole game", objective="game", episode_length=10000,
                           reward_terms=[common_pb2.RewardTerm(kind="native", weight=1.0)])
WOOD = common_pb2.Condition(achievement="collect_wood")
TABLE = common_pb2.Condition(achievement="place_table")
PLAN = planner_pb2.Plan(subtasks=[
    planner_pb2.SubTask(name="wood", decision=planner_pb2.DECISION_CODE, success=[WOOD]),
    planner_pb2.SubTask(name="table", decision=planner_pb2.DECISION_CODE, success=[TABLE])])
SETTINGS = PlannerSettings()


class FakeEnv:
    """RunSkill answers episodes that unlocked the given achievements in the given frames; what it was asked is
    kept."""

    def __init__(self, episodes: list[tuple[list[str], int]]):
        self.episodes, self.asked = episodes, []

    def RegisterSkill(self, request: Any, **_: Any) -> None:
        return None

    def RunSkill(self, request: env_pb2.RunSkillRequest, **_: Any) -> env_pb2.RunSkillResponse:
        self.asked.append(request)
        return env_pb2.RunSkillResponse(success_rate=0.0, episodes=[
            common_pb2.EpisodeSummary(achievements=names, steps=steps, end_reason="death")
            for names, steps in self.episodes])


def game_loops(tmp_path: Path, describe: env_pb2.DescribeResponse, env: Any = None,
               budgets: planner_pb2.Budgets | None = None) -> TwoLoops:
    """A run of the whole game with an all-code plan whose sub-tasks are done."""
    request = planner_pb2.StartRunRequest(task=GAME, agents="slow-fast", budgets=budgets or planner_pb2.Budgets(
        eval_episodes=4))
    two = TwoLoops(Run(tmp_path / "run", request), RunState(), describe, None, SkillLibrary(tmp_path / "lib.json"),
                   Stubs(env=env, learner=None, critic=None), SETTINGS)
    two._adopt_plan(PLAN)
    for name in ("wood", "table"):
        sub = two.state.subtasks[name]
        sub.status, sub.skill_code, sub.success_rate = Status.DONE, f"{name}-1", 1.0
    return two


def test_the_measure_is_the_shared_formula_over_every_achievement(describe: env_pb2.DescribeResponse) -> None:
    episodes = [common_pb2.EpisodeSummary(achievements=["collect_wood", "place_table"]),
                common_pb2.EpisodeSummary(achievements=["collect_wood"]), common_pb2.EpisodeSummary()]
    score, rates = game_task.measure(episodes, describe.achievements)
    assert len(rates) == len(describe.achievements) == 22
    assert rates["collect_wood"] == pytest.approx(200 / 3) and rates["place_table"] == pytest.approx(100 / 3)
    expected = crafter_score(success_rates([list(e.achievements) for e in episodes], list(describe.achievements)))
    assert score == pytest.approx(expected) and score == pytest.approx(
        math.exp((math.log(1 + 200 / 3) + math.log(1 + 100 / 3)) / 22) - 1)


def test_a_game_task_targets_a_score() -> None:
    assert game_task.on_target(GAME, 0.0, 27.3, 0.273) and not game_task.on_target(GAME, 1.0, 27.2, 0.273)
    assert not game_task.on_target(GAME, 0.0, None, 0.0)  # not evaluated
    wood = common_pb2.TaskSpec(name="collect_wood", success=[WOOD])
    assert game_task.on_target(wood, 0.8, None, 0.8) and not game_task.on_target(wood, None, 99.0, 0.0)
    assert game_task.target_text(GAME, 0.273) == "a score of 27.3" and game_task.target_text(wood, 0.8) == "80%"


def test_a_game_budget_defaults_to_the_games_and_covers_one_evaluation(describe: env_pb2.DescribeResponse) -> None:
    assert resolve_budgets(planner_pb2.Budgets(), SETTINGS, GAME).total_env_frames == SETTINGS.game_env_frames
    assert resolve_budgets(planner_pb2.Budgets(), SETTINGS).total_env_frames == SETTINGS.total_env_frames
    assert resolve_budgets(planner_pb2.Budgets(total_env_frames=0), SETTINGS, GAME).total_env_frames == 0
    too_few = resolve_budgets(planner_pb2.Budgets(total_env_frames=50_000, eval_episodes=8), SETTINGS, GAME)
    [problem] = evaluation_problems(too_few, describe, SETTINGS, GAME)
    assert problem.startswith("budgets.total_env_frames=50000 is less than one evaluation of the game task (8 "
                              "episodes x 10000 frames = 80000") and "give at least 80000" in problem
    assert evaluation_problems(too_few, describe, SETTINGS) == []  # another task's evaluations are not counted
    enough = resolve_budgets(planner_pb2.Budgets(total_env_frames=80_000, eval_episodes=8), SETTINGS, GAME)
    assert evaluation_problems(enough, describe, SETTINGS, GAME) == []


def test_the_work_keeps_the_frames_of_the_evaluations_due(tmp_path: Path, describe: env_pb2.DescribeResponse) -> None:
    ctx = game_loops(tmp_path, describe, budgets=planner_pb2.Budgets(total_env_frames=100_000, eval_episodes=2)).ctx
    assert ctx.state.frame_budget == 100_000
    assert ctx.frames_left() == 100_000 - 20_000  # the final evaluation's 2 x 10,000 frames
    begin_iteration(ctx.state, 0, None)
    assert ctx.frames_left() == 100_000 - 40_000 and ctx.evaluation_fits()  # and the iteration's own
    ctx.state.frames_used = 70_000
    assert ctx.frames_left() == 0 and not ctx.evaluation_fits()


def test_a_game_evaluation_plays_the_tasks_episodes_is_scored_and_counted(
        tmp_path: Path, describe: env_pb2.DescribeResponse) -> None:
    env = FakeEnv([(["collect_wood", "place_table"], 300), (["collect_wood"], 200)])
    ctx = game_loops(tmp_path, describe, env).ctx
    ctx.state.frames_used = 1000
    result = evaluate_chain(ctx, episodes=2, seed=7, label="test")
    [asked] = env.asked
    assert asked.max_steps == 10000 and asked.task.objective == "game" and not asked.task.success
    assert result.score == pytest.approx(game_task.measure(
        [common_pb2.EpisodeSummary(achievements=a) for a, _ in env.episodes], describe.achievements)[0])
    assert result.achievement_rates["collect_wood"] == 100.0 and result.achievement_rates["collect_diamond"] == 0.0
    assert ctx.state.frames_used == 1500 and ctx.state.evaluation_frames == 500 and result.frames_used == 1500
    saved = result.as_json()
    assert saved["score"] == result.score and len(saved["achievement_rates"]) == 22


def test_another_tasks_evaluation_is_not_counted(tmp_path: Path, describe: env_pb2.DescribeResponse) -> None:
    env = FakeEnv([(["collect_wood", "place_table"], 300)])
    ctx = game_loops(tmp_path, describe, env).ctx
    ctx.run.request.task.CopyFrom(common_pb2.TaskSpec(name="place_table", success=[TABLE]))
    result = evaluate_chain(ctx, episodes=1, seed=7, label="test")
    assert env.asked[0].max_steps == SETTINGS.final_episode_frames and result.score is None
    assert ctx.state.frames_used == 0 and "score" not in result.as_json()
    assert "score" not in IterationRecord(iteration=0, tokens=0, seconds=0.0, frames=0).as_json()


def test_the_higher_score_is_kept(tmp_path: Path, describe: env_pb2.DescribeResponse) -> None:
    ctx = game_loops(tmp_path, describe).ctx

    def scored(iteration: int, score: float) -> IterationRecord:
        return IterationRecord(iteration=iteration, tokens=0, seconds=0.0, frames=0, success_rate=0.0,
                               successes=[False] * 4, score=score)

    assert task_review.keep_best(ctx, scored(0, 5.0)) == "the first evaluated controller: kept"
    ctx.state.subtasks["table"].skill_code = "table-2"
    assert task_review.keep_best(ctx, scored(1, 4.0)) == ("not better (score 4.0 against iteration 0's score 5.0): "
                                                          "that controller is restored")
    assert ctx.state.subtasks["table"].skill_code == "table-1"
    ctx.state.subtasks["table"].skill_code = "table-3"
    assert task_review.keep_best(ctx, scored(2, 6.5)).startswith("kept: score 6.5 against iteration 0's")
    assert ctx.state.best["iteration"] == 2 and ctx.state.best["score"] == 6.5


def test_the_report_shows_the_score_the_rates_and_every_frame(tmp_path: Path,
                                                             describe: env_pb2.DescribeResponse) -> None:
    rates = {name: 0.0 for name in describe.achievements} | {"collect_wood": 75.0}
    state = RunState(frames_used=123_456, frame_budget=1_000_000, evaluation_frames=23_456, finished=True,
                     final={"success_rate": 0.0, "episodes": 4, "seed": 100, "controller": "chain of coded skills",
                            "score": 1.2, "achievement_rates": rates},
                     iterations=[{"iteration": 0, "tokens": 10, "seconds": 1.0, "frames": 5000, "success_rate": 0.0,
                                  "episodes": 4, "score": 0.9, "achievement_rates": rates}])
    state.save(tmp_path)
    (tmp_path / "request.json").write_text(json.dumps({"task": {"name": "crafter", "objective": "game"}}))
    text = write_run_report(tmp_path, ended="finished").read_text()
    assert "- final score: **1.2** over 4 episodes on worlds 100..103 (chain of coded skills)" in text
    assert "123,456 of 1,000,000; 23,456 of them in whole-task evaluations" in text
    assert "| score 0.9 (4 episodes) |" in text and "## The game's achievements" in text
    assert "| collect_wood | 75.0% | 75.0% |" in text and "| **score** | **0.9** | **1.2** |" in text
    assert sum(line.startswith("| ") and "%" in line for line in text.splitlines()) >= 22


def test_the_slow_agent_plans_a_curriculum_for_the_game(describe: env_pb2.DescribeResponse,
                                                        library: SkillLibrary) -> None:
    slow = SlowAgent(None, describe, library)  # type: ignore[arg-type]
    prompt, _ = slow.prompt(GAME)
    assert GAME_OBJECTIVE in prompt and GOAL_OBJECTIVE not in prompt and "curriculum" in prompt
    game_protocol = EvalProtocol(final_frames=10000, game=True).plan_test()
    assert "evaluation episodes last 10000 frames or until the player dies" in game_protocol
    assert "Every frame counts toward the run's frame budget, the evaluations' too." in game_protocol
    assert "or until the player dies" not in EvalProtocol().plan_test()
    other, _ = slow.prompt(common_pb2.TaskSpec(name="place_table", success=[TABLE]))
    assert GOAL_OBJECTIVE in other and GAME_OBJECTIVE not in other
    # Names come from Describe, never from the prompt's own text.
    assert not any(name in GAME_OBJECTIVE for name in (*describe.achievements, *describe.items))
