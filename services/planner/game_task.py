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
  task's evaluations), and the work keeps back the frames of the whole-task evaluations still due: the final one,
  and the iteration's own while an iteration runs, each ``eval_episodes`` x :func:`episode_cap`. Unset, the budget
  is the planner's ``game_env_frames`` (the benchmark's 1M); set, it must cover one evaluation at the game's length.
- Episode cap: until one of the run's evaluations was measured, an evaluation episode may last the game's length
  (10,000 frames) and that is what is kept back; once measured, twice the longest episode any of the run's
  evaluations played (at least :data:`EVALUATION_FLOOR`, at most the game's length). Kept back at the game's
  length, a 1M-frame run left most of its budget unspent (32 x 10,000 frames held for each evaluation still due,
  where the game's episodes mostly end within a few hundred frames); an evaluation never spends more than it
  kept back, since its episodes stop at the cap (an episode cut there is counted and reported, and the cap
  doubles for the next evaluation, as the longest episode then is the cap).
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


EVALUATION_FLOOR = 1_000
"""The shortest episode cap once the run's evaluations were measured (:func:`episode_cap`)."""


def episode_cap(task: common_pb2.TaskSpec, settings: PlannerSettings, longest: int) -> int:
    """Frames one whole-task evaluation episode may last in this run (module docstring): ``longest`` is the
    longest episode the run's evaluations played so far (0: none yet); another task's episodes are not capped."""
    full = episode_frames(task, settings)
    if not is_game(task) or longest <= 0:
        return full
    return min(full, max(EVALUATION_FLOOR, 2 * longest))


def cut_episodes(steps: Sequence[int], cap: int, full: int) -> int:
    """How many of an evaluation's episodes stopped at its cap, short of the game's length ``full``."""
    return sum(1 for n in steps if n >= cap) if cap < full else 0


def evaluation_frames(task: common_pb2.TaskSpec, budgets: planner_pb2.Budgets, settings: PlannerSettings) -> int:
    """The most frames one whole-task evaluation may spend (every episode to the game's length): what a budget
    must cover at StartRun."""
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
