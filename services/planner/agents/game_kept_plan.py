"""The fast agent's part in RL around the kept plan on a task whose objective is the whole game (issue 36, item 2;
:mod:`services.planner.game_kept_plan`): what it reads and its one LLM call. The answer is the kept plan's
(:func:`~services.planner.schemas.kept_plan_schema`), applied as :mod:`services.planner.agents.kept_plan` applies it.

It reads the game in the game's terms: the measure is the game's score over the achievements (no success condition,
no stage paid: the planner pays the task's own reward terms, as :func:`services.planner.game_task.on_the_game` sets
them), the kept plan's steps, how the plan's chain died in its evaluation (the caller's text, from
:mod:`services.planner.survival`) and its achievements' rates. Every game fact comes from Describe and the task."""

from __future__ import annotations

import dataclasses

from pydantic import BaseModel

from rlgpt.env_contract import PLAN_ACTION
from rlgpt.reward_kinds import REWARD_KINDS
from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.agents.fast import AGENT, FastAgent
from services.planner.agents.kept_plan import KeptPlanAnswer, hand_back_text, kept_plan_answer, plan_text
from services.planner.agents.texts import reward_kinds_text, skill_api_text
from services.planner.answer_limits import answer_limits
from services.planner.prompts import game_text, render
from services.planner.schemas import KEPT_PLAN_OWN_KINDS, MAX_MACRO_ACTIONS, kept_plan_schema

HAND_BACK_WHEN_HURT = True
"""Where the answer does not say: the plan action hands control back on the frame the player is hurt, so the policy
can act against what hurts it (in the whole game most episodes end in death)."""


@dataclasses.dataclass(frozen=True)
class GameBriefing:
    """What the caller measured and decided for the training: how the plan's chain did, and the training's size."""

    deaths: str
    """How the chain's evaluation episodes died, in words (or that none was made or none died)."""
    chain: str
    """The chain's score and its achievements' success rates in words ("" when not scored)."""
    env_frames: int
    """Frames of the training."""
    episode_frames: int
    """Frames of one of the game's episodes (the training's and the evaluation's)."""
    eval_episodes: int
    """Episodes the trained policy is scored on."""


def game_reward_text(task: common_pb2.TaskSpec) -> str:
    """The task's own reward terms in words (what the training pays whatever the answer)."""
    return "; ".join(f"{t.kind}{f' {t.target}' if t.target else ''} with weight {t.weight:g}"
                     + (f", {REWARD_KINDS[t.kind].doc}" if t.kind in REWARD_KINDS else "")
                     for t in task.reward_terms) or "(none)"


def training_text(briefing: GameBriefing) -> str:
    """How the policy trains and is judged, in the game's terms."""
    return (
        f"The policy trains for {briefing.env_frames} frames in total (a frame is one game step; every frame counts, "
        "those the chain and your macro actions run included, and so do the evaluation's toward the run's frame "
        f"budget), in the game's episodes: up to {briefing.episode_frames} frames, ending early only when the player "
        "dies. Every episode is a fresh, newly generated world with its own seed; the player starts holding nothing "
        "(status values at their start values, see the rules). Then the policy is evaluated on "
        f"{briefing.eval_episodes} new worlds (seeds never used in training), the same worlds the chain's score "
        "above was measured on, and measured by the game's score over those episodes. The run's final controller "
        "is the one that scores highest there: the chain, a policy with the plan's coded skills as macro actions, "
        "or this policy around the chain.")


def game_kept_plan_prompt(fast: FastAgent, task: common_pb2.TaskSpec, plan: planner_pb2.Plan,
                          briefing: GameBriefing) -> tuple[str, type[BaseModel]]:
    """The prompt and its answer schema (primitives and reward kinds from Describe, the kept plan's schema)."""
    describe = fast.describe
    schema = kept_plan_schema(describe)
    prompt = render("fast_agent_game_kept_plan", game=game_text(describe), episode_frames=str(briefing.episode_frames),
                    achievements=", ".join(describe.achievements), plan=plan_text(plan),
                    deaths=briefing.deaths, chain=briefing.chain, plan_action=PLAN_ACTION,
                    max_macros=str(MAX_MACRO_ACTIONS), hand_back=hand_back_text(describe),
                    game_reward=game_reward_text(task),
                    reward_kinds=reward_kinds_text(describe, leave_out=KEPT_PLAN_OWN_KINDS),
                    training=training_text(briefing), skill_api=skill_api_text(describe),
                    hand_back_field=', "hand_back_within": ...' if describe.threats else "",
                    answer_limits=answer_limits(schema))
    return prompt, schema


def write_game_kept_plan(fast: FastAgent, task: common_pb2.TaskSpec, plan: planner_pb2.Plan, briefing: GameBriefing,
                         iteration: int = 0) -> KeptPlanAnswer:
    """The fast agent's answer (one LLM call; StructuredOutputError when it gives none that fits); it hands back
    when the player is hurt unless it says otherwise."""
    prompt, schema = game_kept_plan_prompt(fast, task, plan, briefing)
    answer, record = fast.llm.complete(AGENT, [{"role": "user", "content": prompt}], schema, iteration=iteration)
    return kept_plan_answer(answer, record, hurt=HAND_BACK_WHEN_HURT)
