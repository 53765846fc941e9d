"""The planner's prompts, one text file per prompt under ``prompts/``, and the texts they share.

Game facts never appear here: they come from ``Describe`` (``describe.rules``, the env server's; the game's name
and the actions the examples use too). What is here is the planner's own: how it tests the agents' answers (its
budgets).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from pathlib import Path

from rlgpt import prompts
from rlgpt.v1 import common_pb2, env_pb2
from services.planner.settings import PlannerSettings

PROMPT_DIR = Path(__file__).parent / "prompts"
render = functools.partial(prompts.render, PROMPT_DIR)
"""A planner prompt by name (``prompts/<name>.txt``), its fields filled."""
_DEFAULTS = PlannerSettings()


def game_text(describe: env_pb2.DescribeResponse) -> str:
    """The game as the prompts' ``{game}`` names it: "the game <Describe's display name>", or "a game"."""
    return f"the game {describe.display_name}" if describe.display_name else "a game"


def idle_and_moves(describe: env_pb2.DescribeResponse) -> str:
    """The examples' ``{idle_and_moves}``: the idle action and the moves (Describe's action_roles), a JSON list."""
    roles = describe.action_roles
    return json.dumps([a for a in (roles.idle, *roles.move) if a])


def inventory_text(items: list[common_pb2.ItemCount] | dict[str, int]) -> str:
    pairs = items.items() if isinstance(items, dict) else ((i.item, i.count) for i in items)
    return ", ".join(f"{count} {item}" for item, count in pairs if count) or "nothing"


@dataclasses.dataclass(frozen=True)
class EvalProtocol:
    """How the planner tests what the agents write (its own budgets), in the words every prompt uses.

    ``test_*``: a coded skill's test (RunSkill); ``env_frames``: one RL training; ``eval_episodes``: the
    evaluation of a trained policy and of the whole task at the end; ``final_frames``: the whole task's episodes
    when its sub-tasks are all coded. ``placed``: what the rules say can be placed (Describe's rules), named
    where the texts say placed things do not carry over into a test's new world.
    """

    test_episodes: int = _DEFAULTS.test_episodes
    test_steps: int = _DEFAULTS.test_steps
    env_frames: int = _DEFAULTS.env_frames_per_training
    eval_episodes: int = _DEFAULTS.eval_episodes
    final_frames: int = _DEFAULTS.final_episode_frames
    placed: tuple[str, ...] = ()
    game: bool = False
    """The task is the whole game (services/planner/game_task.py): its episodes never succeed, its achievements
    are scored, and every frame counts."""

    def with_rules(self, rules: common_pb2.WorldRules) -> EvalProtocol:
        return dataclasses.replace(self, placed=tuple(rule.item for rule in rules.place))

    def _placed(self) -> str:
        return f"nothing placed by an earlier sub-task ({', '.join(self.placed)})" if self.placed else \
            "nothing placed by an earlier sub-task"

    def code_test(self, start: list[common_pb2.ItemCount], after: Sequence[str] = ()) -> str:
        """``after``: the earlier sub-tasks whose coded skills run first in every episode (the chain's prefix)."""
        if after:
            begins = (f"Each episode is a fresh, newly generated world (every episode has its own seed; the same "
                      "worlds for every attempt at this sub-task, other worlds in the final evaluation) where the "
                      f"coded skills of the sub-tasks before this one ({', '.join(after)}) run first, each until its "
                      "success condition holds, as they will in the whole task's chain (an episode whose player "
                      "dies there starts again in the next world). The skill starts where they hand over: with what "
                      "they collected and placed (what their success conditions ask, unless one ran out of frames "
                      "first), where they stopped, at that time of day, with the status values they left and the map "
                      "they saw. Their frames count too. ")
        else:
            begins = (f"Each episode is a fresh, newly generated world (every episode has its own seed; the same "
                      f"worlds for every attempt at this sub-task, other worlds in the final evaluation), so "
                      f"{self._placed()} is in it. The player starts holding: {inventory_text(start)} (status "
                      "values at their start values, see the rules). ")
        return (
            f"The skill is tested on {self.test_episodes} episodes. {begins}The skill runs once "
            f"per episode, one frame (game step) per yielded action, for at most {self.test_steps} frames; the "
            f"episode ends when the skill returns, when the player dies, or at {self.test_steps} frames. An "
            "episode is a success when the success condition holds at any frame of it; a skill that returns "
            "before then has failed that episode. The attempt is judged by its success rate over the episodes, "
            "and every frame counts toward the run's frame budget. At the end of the run the skills of the plan "
            "also run one after another in one world (each continuing where the previous one stopped).")

    def rl_test(self, start: list[common_pb2.ItemCount], env_frames: int | None = None,
                after: Sequence[str] = ()) -> str:
        """``after``: the earlier sub-tasks whose coded skills run first in every episode (the chain's prefix)."""
        frames = env_frames or self.env_frames
        if after:
            begins = (f"Every episode is a fresh, newly generated world with its own seed, where the coded skills of "
                      f"the sub-tasks before this one ({', '.join(after)}) run first, each until its success "
                      "condition holds (their frames count too, and earn no reward); the policy acts from where they "
                      "hand over, with what they collected and placed, as it will in the whole task's chain. ")
        else:
            begins = (f"Every episode is a fresh, newly generated world with its own seed, so {self._placed()} is in "
                      f"it; the player starts holding: {inventory_text(start)} (status values at their start values, "
                      "see the rules). ")
        return (
            f"The policy trains for {frames} frames in total (a frame is one game step; every frame of every "
            "episode counts, a macro action counts each frame it runs), in episodes of `episode_length` frames "
            f"(your choice). {begins}An episode ends when the player dies or after `episode_length` frames; "
            "reaching the success condition ends it only where `end_on_success` is true (the \"success\" reward is "
            "paid once). Then the policy is "
            f"evaluated on {self.eval_episodes} episodes in other new worlds (seeds never used in training), with "
            "the same start and length; an episode is a success when the success condition holds at any frame of "
            "it. The sub-task is judged by that success rate.")

    def kept_plan_test(self, env_frames: int) -> str:
        """RL around a kept plan: its training and how it is judged against the chain."""
        return (
            f"The policy trains for {env_frames} frames in total (a frame is one game step; every frame counts, "
            f"those the chain and your macro actions run included), in episodes of up to {self.final_frames} "
            "frames. Every episode is a fresh, newly generated world with its own seed; the player starts holding "
            "nothing (status values at their start values, see the rules). An episode ends when the player dies, "
            f"when the task succeeds, or after {self.final_frames} frames. Then the policy and the chain alone are "
            f"both evaluated on the same {self.eval_episodes} new worlds (seeds never used in training); an "
            "episode is a success when the task's success condition holds. The policy replaces the chain as the "
            "run's controller only if it succeeds in more of them.")

    def plan_test(self) -> str:
        return (
            "Each sub-task is tested on its own, in fresh, newly generated worlds. Its test episodes start with, "
            "for each item, the largest amount that the success conditions of the sub-tasks before it leave (an "
            "achievement that gives an item leaves the amount the rules give; an inventory condition leaves its "
            "count; placing leaves nothing in the inventory; what those sub-tasks used up is not subtracted). "
            f"N{self._placed()[1:]} is in a new world: a "
            "sub-task that needs a placed thing nearby must place it itself, so the sub-tasks before it must leave "
            "the items placing it uses. A frame is one game step (one action). "
            f"A coded sub-task is tested on {self.test_episodes} episodes of at most {self.test_steps} frames; an "
            f"RL sub-task trains for up to {self.env_frames} frames and is evaluated on {self.eval_episodes} "
            "episodes. A sub-task that fails is revised by the fast agent, then by you. At the end the whole task "
            f"is evaluated on {self.eval_episodes} new worlds, starting with an empty inventory: the plan runs as "
            f"a chain in one world for up to {self.final_frames} frames, each sub-task's skill or trained policy "
            "acting until its success conditions hold, then the next one's; an episode ends early when the player "
            "dies. A later plan's sub-task with the same name and success conditions keeps its skill or policy; "
            "under a new name it is written or trained anew." + (self._game_end() if self.game else ""))

    def _game_end(self) -> str:
        return (f" The task is the whole game: its evaluation episodes last {self.final_frames} frames or until the "
                "player dies, none of them succeeds or ends early, and each counts the achievements unlocked in it. "
                "Every frame counts toward the run's frame budget, the evaluations' too.")

    def judge_text(self, decision: str, start: list[common_pb2.ItemCount], env_frames: int | None = None,
                   after: Sequence[str] = ()) -> str:
        """What the critic reads: the same words the agent that wrote the attempt read."""
        return self.rl_test(start, env_frames, after) if decision == "rl" else self.code_test(start, after)
