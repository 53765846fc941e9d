"""A run's budgets: the planner alone defaults and checks them.

``rlgpt.v1.Budgets`` fields are optional. An unset field takes the planner's default, the
:class:`~services.planner.settings.PlannerSettings` field of the same name (``RLGPT_PLANNER_<FIELD>``); a set
field must lie in the range that settings field declares (its ``ge``/``le``). Clients (``rlgpt run``,
benchmarks) send only what a user chose. A game task (:mod:`services.planner.game_task`) counts its whole spend:
its unset frame budget is ``game_env_frames``, and a set one must cover one whole-task evaluation.
"""

from __future__ import annotations

import dataclasses

from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner import game_task
from services.planner.settings import PlannerSettings

BUDGET_FIELDS = tuple(f.name for f in planner_pb2.Budgets.DESCRIPTOR.fields)
_SETTINGS = {f.name: f for f in dataclasses.fields(PlannerSettings)}


def allowed_range(name: str) -> str:
    """The values a set budget may take, from its settings field (``ge``, optional ``le``): ``in 1..20``,
    ``>= 1``."""
    meta = _SETTINGS[name].metadata
    return f"in {meta['ge']}..{meta['le']}" if "le" in meta else f">= {meta['ge']}"


def _allowed(name: str, value: int) -> bool:
    meta = _SETTINGS[name].metadata
    return meta["ge"] <= value <= meta.get("le", value)


def budget_problems(budgets: planner_pb2.Budgets, settings: PlannerSettings) -> list[str]:
    """One line per set budget outside its range, naming the field, the range and the default."""
    return [f"budgets.{name}={getattr(budgets, name):.6g} must be {allowed_range(name)} (unset: the planner's "
            f"default, {getattr(settings, name)})"
            for name in BUDGET_FIELDS if budgets.HasField(name) and not _allowed(name, getattr(budgets, name))]


def resolve_budgets(budgets: planner_pb2.Budgets, settings: PlannerSettings,
                    task: common_pb2.TaskSpec | None = None) -> planner_pb2.Budgets:
    """Every field set: the request's value where it has one, the planner's default elsewhere (for a game
    ``task``, the frame budget's is ``game_env_frames``)."""
    resolved = planner_pb2.Budgets(**{name: getattr(budgets, name) if budgets.HasField(name)
                                      else getattr(settings, name) for name in BUDGET_FIELDS})
    if task is not None and game_task.is_game(task) and not budgets.HasField("total_env_frames"):
        resolved.total_env_frames = settings.game_env_frames
    return resolved


def evaluation_problems(budgets: planner_pb2.Budgets, describe: env_pb2.DescribeResponse,
                        settings: PlannerSettings, task: common_pb2.TaskSpec | None = None) -> list[str]:
    """What the resolved budgets ask that the env server cannot serve or that cannot buy one test: an evaluation
    larger than one RunSkill call may be (the env server's limit), a frame budget below one skill test, or for a
    game ``task`` (which counts every frame) below one whole-task evaluation."""
    problems = []
    limit = describe.limits.max_run_skill_episodes
    if limit and budgets.eval_episodes > limit:
        problems.append(f"budgets.eval_episodes={budgets.eval_episodes} is more than the env server evaluates in "
                        f"one call ({limit}, its max_run_skill_episodes); ask for at most {limit}")
    one_test = settings.test_episodes * settings.test_steps
    if 0 < budgets.total_env_frames < one_test:
        problems.append(f"budgets.total_env_frames={budgets.total_env_frames} is less than one skill test "
                        f"({settings.test_episodes} episodes x {settings.test_steps} frames = {one_test}); "
                        f"give at least {one_test}, or 0 for unbounded")
    if task is not None and game_task.is_game(task):
        need = game_task.evaluation_frames(task, budgets, settings)
        if 0 < budgets.total_env_frames < need:
            problems.append(f"budgets.total_env_frames={budgets.total_env_frames} is less than one evaluation of "
                            f"the game task ({budgets.eval_episodes} episodes x "
                            f"{game_task.episode_frames(task, settings)} frames = {need}, every frame counted); give "
                            f"at least {need}, or 0 for unbounded")
    return problems
