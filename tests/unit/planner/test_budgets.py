"""A run's budgets: the planner's defaults (PlannerSettings) for unset fields, its one range check for set ones,
and `rlgpt run` sending only what the user typed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from typer.testing import CliRunner

from rlgpt.app.cli import app
from rlgpt.app.runner import RunOptions, budgets
from rlgpt.v1 import env_pb2, planner_pb2
from services.planner.budgets import BUDGET_FIELDS, allowed_range, budget_problems, evaluation_problems, resolve_budgets
from services.planner.settings import PlannerSettings

SETTINGS = PlannerSettings()


def test_every_budget_has_a_documented_planner_default_with_a_range() -> None:
    fields = {f.name: f for f in dataclasses.fields(PlannerSettings)}
    assert set(BUDGET_FIELDS) == {"max_outer_iterations", "max_inner_iterations", "env_frames_per_training",
                                  "eval_episodes", "candidates", "max_tokens", "total_env_frames",
                                  "target_success"}
    for name in BUDGET_FIELDS:
        assert fields[name].metadata["help"] and "ge" in fields[name].metadata


def test_unset_budgets_take_the_planners_defaults_and_set_ones_stay() -> None:
    resolved = resolve_budgets(planner_pb2.Budgets(), SETTINGS)
    assert {name: getattr(resolved, name) for name in BUDGET_FIELDS} == {
        name: getattr(SETTINGS, name) for name in BUDGET_FIELDS}
    assert (SETTINGS.env_frames_per_training, SETTINGS.total_env_frames) == (15000, 60000)  # `rlgpt run`'s
    given = resolve_budgets(planner_pb2.Budgets(max_outer_iterations=5, total_env_frames=0), SETTINGS)
    assert given.max_outer_iterations == 5 and given.total_env_frames == 0  # a set 0: unbounded, not the default
    assert given.max_inner_iterations == SETTINGS.max_inner_iterations
    other = dataclasses.replace(SETTINGS, eval_episodes=3)  # RLGPT_PLANNER_EVAL_EPISODES=3
    assert resolve_budgets(planner_pb2.Budgets(), other).eval_episodes == 3


def test_a_set_budget_outside_its_range_names_the_field_the_range_and_the_default() -> None:
    assert budget_problems(planner_pb2.Budgets(), SETTINGS) == []
    assert budget_problems(planner_pb2.Budgets(total_env_frames=0, max_tokens=0, max_outer_iterations=20),
                           SETTINGS) == []
    problems = budget_problems(planner_pb2.Budgets(env_frames_per_training=0, candidates=17,
                                                   max_outer_iterations=0, total_env_frames=-1), SETTINGS)
    assert problems == [
        "budgets.max_outer_iterations=0 must be in 1..20 (unset: the planner's default, 4)",
        "budgets.env_frames_per_training=0 must be >= 1 (unset: the planner's default, 15000)",
        "budgets.candidates=17 must be in 1..16 (unset: the planner's default, 1)",
        "budgets.total_env_frames=-1 must be >= 0 (unset: the planner's default, 60000)"]
    assert allowed_range("eval_episodes") == "in 1..256"


def test_a_target_outside_0_to_1_is_refused_with_its_value_and_range() -> None:
    for bad in (1.5, -0.25, float("nan")):
        [problem] = budget_problems(planner_pb2.Budgets(target_success=bad), SETTINGS)
        assert problem.startswith(f"budgets.target_success={bad:.6g} must be in 0.0..1.0")
        assert "the planner's default, 0.8" in problem
    assert budget_problems(planner_pb2.Budgets(target_success=1.0), SETTINGS) == []


def test_evaluations_beyond_the_env_servers_limit_or_a_budget_below_one_test_are_refused() -> None:
    describe = env_pb2.DescribeResponse(limits=env_pb2.ServerLimits(max_run_skill_episodes=64))
    assert evaluation_problems(resolve_budgets(planner_pb2.Budgets(), SETTINGS), describe, SETTINGS) == []
    [problem] = evaluation_problems(resolve_budgets(planner_pb2.Budgets(eval_episodes=100), SETTINGS), describe,
                                    SETTINGS)
    assert problem.startswith("budgets.eval_episodes=100 is more than the env server evaluates in one call (64")
    one_test = SETTINGS.test_episodes * SETTINGS.test_steps
    [problem] = evaluation_problems(resolve_budgets(planner_pb2.Budgets(total_env_frames=one_test - 1), SETTINGS),
                                    describe, SETTINGS)
    assert f"total_env_frames={one_test - 1} is less than one skill test" in problem and str(one_test) in problem
    unbounded = resolve_budgets(planner_pb2.Budgets(total_env_frames=0), SETTINGS)
    assert evaluation_problems(unbounded, describe, SETTINGS) == []


def test_rlgpt_run_sends_only_the_budgets_typed(tmp_path: Path) -> None:
    options = RunOptions(task="collect_wood", success="", mode="rl-gpt", agents="", resume=None, runs_dir=tmp_path)
    assert budgets(options) == planner_pb2.Budgets()
    options = dataclasses.replace(options, frames_per_training=0, total_frames=0, outer=3)
    sent = budgets(options)
    assert sent.HasField("env_frames_per_training") and sent.env_frames_per_training == 0  # the planner refuses it
    assert sent.HasField("total_env_frames") and sent.max_outer_iterations == 3
    assert not sent.HasField("max_inner_iterations")


def test_rlgpt_run_help_names_the_planners_defaults() -> None:
    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200", "TERM": "dumb"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "the planner's default (15000 unless RLGPT_PLANNER_ENV_FRAMES_PER_TRAINING is set" in text
    assert "the planner's default (60000 unless RLGPT_PLANNER_TOTAL_ENV_FRAMES" in text
