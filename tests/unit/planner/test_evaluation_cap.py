"""A game run keeps back what its evaluations will spend, not 10,000 frames per episode (services/planner/game_task.py
``episode_cap``): before any evaluation was measured the game's length; then twice the longest episode the run's
evaluations played (at least EVALUATION_FLOOR, at most the game's length). An evaluation's episodes stop at the
cap, so it never spends more than it kept back; episodes cut there are counted and the cap doubles."""

from __future__ import annotations

import json
from pathlib import Path

from test_game_measure import GAME, FakeEnv, game_loops

from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner import game_task
from services.planner.controller import evaluate_chain
from services.planner.iteration_costs import begin_iteration
from services.planner.report_game import score_line
from services.planner.settings import PlannerSettings
from services.planner.state import RunState

SETTINGS = PlannerSettings()


def test_the_cap_follows_the_longest_episode_measured() -> None:
    assert game_task.episode_cap(GAME, SETTINGS, 0) == 10_000  # nothing measured: the game's length
    assert game_task.episode_cap(GAME, SETTINGS, 300) == game_task.EVALUATION_FLOOR == 1_000
    assert game_task.episode_cap(GAME, SETTINGS, 3_000) == 6_000
    assert game_task.episode_cap(GAME, SETTINGS, 7_000) == 10_000  # never past the game's length
    goal = common_pb2.TaskSpec(name="collect_wood", success=[common_pb2.Condition(achievement="collect_wood")])
    assert game_task.episode_cap(goal, SETTINGS, 300) == SETTINGS.final_episode_frames  # not capped
    assert game_task.cut_episodes([1_000, 999, 1_000], 1_000, 10_000) == 2
    assert game_task.cut_episodes([10_000], 10_000, 10_000) == 0  # the game's own end is not a cut


def test_a_measured_evaluation_frees_what_the_next_ones_kept_back(tmp_path: Path,
                                                                 describe: env_pb2.DescribeResponse) -> None:
    env = FakeEnv([(["collect_wood"], 300), ([], 200)])
    ctx = game_loops(tmp_path, describe, env, budgets=planner_pb2.Budgets(total_env_frames=100_000,
                                                                         eval_episodes=2)).ctx
    begin_iteration(ctx.state, 0, None)
    assert ctx.frames_left() == 100_000 - 2 * 20_000  # the final's and the iteration's, at the game's length
    first = evaluate_chain(ctx, episodes=2, seed=7, label="iteration 0")
    assert env.asked[0].max_steps == 10_000 and first.episode_cap == 10_000 and first.episodes_cut == 0
    assert ctx.state.longest_episode == 300 and ctx.evaluation_hold() == 2 * 1_000
    assert ctx.frames_left() == 100_000 - 500 - 2 * 2_000  # 36,000 frames more for the work
    assert ctx.evaluation_fits()


def test_an_episode_at_the_cap_is_cut_counted_and_the_cap_doubles(tmp_path: Path,
                                                                  describe: env_pb2.DescribeResponse) -> None:
    env = FakeEnv([(["collect_wood"], 1_000), ([], 400)])  # the first lived to the cap
    ctx = game_loops(tmp_path, describe, env).ctx
    ctx.state.longest_episode = 300
    result = evaluate_chain(ctx, episodes=2, seed=7, label="final")
    assert env.asked[0].max_steps == 1_000  # the episodes may last the cap, no more
    assert result.episode_cap == 1_000 and result.episodes_cut == 1
    assert result.as_json()["episodes_cut"] == 1
    assert ctx.state.longest_episode == 1_000 and ctx.episode_cap() == 2_000  # the next evaluation's
    line = score_line(result.as_json(), 0.273)
    assert line.endswith("; 1 of them stopped at the run's cap of 1,000 frames, alive")


def test_a_state_saved_before_the_cap_reads_its_longest_episode_from_its_evaluations(tmp_path: Path) -> None:
    doc = {"iterations": [{"iteration": 0, "failed": [{"steps": 56}, {"steps": 507}]}, {"iteration": 1}]}
    (tmp_path / "state.json").write_text(json.dumps(doc))
    assert RunState.load(tmp_path).longest_episode == 507
    (tmp_path / "state.json").write_text(json.dumps({**doc, "longest_episode": 900}))
    assert RunState.load(tmp_path).longest_episode == 900  # measured: kept
