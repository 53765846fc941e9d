"""A task whose objective is the game itself (``TaskSpec.objective`` "game", as the env server's ResolveTask spells
out e.g. ``crafter``): what it changes in a run. The env server says what the task is; this module is what the
planner does with it.

- Episodes: every whole-task evaluation plays the task's own episodes (``TaskSpec.episode_length``: Crafter's
  10,000 frames, or until the player dies), not the planner's ``final_episode_frames``.
- Measure: no episode succeeds; an evaluation is measured by the game's score over its achievements' success rates
  (:mod:`rlgpt.game_score`, Crafter's formula), computed from the achievements each episode unlocked, and the
  rates themselves.
- Target: ``Budgets.target_success`` is a score, as a fraction of the highest (0.273 is a score of 27.3); the run
  is done when an evaluation's score reaches it. A later controller replaces the best one when it scores higher on
  the same worlds.
- Frames: the run's whole spend counts toward its frame budget (skill tests, trainings, the policies' and the whole
  task's evaluations), and the work keeps back the frames of the whole-task evaluations still due (each at most
  ``eval_episodes`` x the episode length): the final one, and the iteration's own while an iteration runs. Unset,
  the budget is the planner's ``game_env_frames`` (the benchmark's 1M); set, it must cover one evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rlgpt.env_contract import GAME_OBJECTIVE
from rlgpt.game_score import crafter_score, success_rates
from rlgpt.v1 import common_pb2, learner_pb2, planner_pb2
from services.planner.settings import PlannerSettings


def is_game(task: common_pb2.TaskSpec) -> bool:
    """Whether the task's objective is the game itself."""
    return task.objective == GAME_OBJECTIVE


def episode_frames(task: common_pb2.TaskSpec, settings: PlannerSettings) -> int:
    """Frames of one whole-task evaluation episode: a game task's own length, else ``final_episode_frames``."""
    return (task.episode_length or settings.final_episode_frames) if is_game(task) else settings.final_episode_frames


def evaluation_frames(task: common_pb2.TaskSpec, budgets: planner_pb2.Budgets, settings: PlannerSettings) -> int:
    """The most frames one whole-task evaluation may spend (every episode to its end)."""
    return budgets.eval_episodes * episode_frames(task, settings)


def on_the_game(config: learner_pb2.RLConfig, task: common_pb2.TaskSpec, settings: PlannerSettings) -> None:
    """``config`` trains on the game itself: the task as the env server resolved it (its name and objective), its
    own reward terms and its episodes."""
    config.task.CopyFrom(common_pb2.TaskSpec(name=task.name, objective=task.objective))
    del config.reward_terms[:]
    config.reward_terms.extend(task.reward_terms)
    config.episode_length = episode_frames(task, settings)


def measure(episodes: Sequence[common_pb2.EpisodeSummary],
            achievements: Sequence[str]) -> tuple[float, dict[str, float]]:
    """The game's score (percent) and each achievement's success rate (percent) over ``episodes``;
    ``achievements``: Describe's, all of them (one never unlocked weighs on the score)."""
    rates = success_rates([list(e.achievements) for e in episodes], list(achievements))
    return crafter_score(rates), rates


def on_target(task: common_pb2.TaskSpec, success_rate: float | None, score: float | None, target: float) -> bool:
    """Whether an evaluation reached the run's target: a game task's score (as a fraction of 100), another
    task's success rate. None: not evaluated."""
    if is_game(task):
        return score is not None and not math.isnan(score) and score / 100.0 >= target
    return success_rate is not None and success_rate >= target


def target_text(task: common_pb2.TaskSpec, target: float) -> str:
    """The run's target in words: "a score of 27.3" for a game task, "80%" for another."""
    return f"a score of {100.0 * target:.1f}" if is_game(task) else f"{target:.0%}"


def score_text(score: float | None) -> str:
    return "not scored" if score is None or math.isnan(score) else f"score {score:.1f}"
