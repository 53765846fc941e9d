"""RL around the kept plan on a game task (services/planner/game_kept_plan.py, issue 36 item 2) configured by the
fast agent: one LLM call told the game's score, the plan's steps, how the plan's chain died (survival's text) and
its achievements' rates, never a success condition or a stage; its macro actions and reward terms reach the
training beside the game's own reward; an unusable answer or the one-agent setup trains the planner's defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kept_plan_support import ScriptedLLM
from test_game_final import SpendingLearner
from test_game_macro_controller import Env, with_learner

from services.planner import game_kept_plan
from services.planner.agents.fast import FastAgent
from services.planner.context import AgentSetup
from services.planner.loops import TwoLoops
from services.planner.skill_library import SkillLibrary

FRAMES = 20_000
SURVIVE = "def skill(agent):\n    for _ in range(3):\n        yield 'noop'\n"
"""A macro action's code (the test's own: no prompt shows code)."""
ANSWER = {"primitive_actions": ["noop", "move_left", "do"], "skill_max_steps": 8,
          "macro_actions": [{"name": "keep_alive", "description": "stays alive", "code": SURVIVE}],
          "reward_terms": [{"kind": "death", "weight": -2}, {"kind": "health", "weight": 0.5}]}
DEAD = [  # the chain's evaluation as its iteration record keeps it (controller.failed_episodes)
    {"end_reason": "death", "death_cause": "zombie", "steps": 180, "achievements": ["collect_wood"],
     "inventory": {"wood": 1}, "tail": ["step 170 at (3, 4): health 3->1 (zombie)", "end: died (zombie)"]},
    {"end_reason": "death", "death_cause": "arrow", "steps": 420, "achievements": ["collect_wood", "place_table"],
     "inventory": {}}]
RATES = {"collect_wood": 100.0, "place_table": 50.0, "collect_drink": 0.0}


def game_run(tmp_path: Path, describe, answer: dict[str, Any] | None) -> tuple[TwoLoops, ScriptedLLM,
                                                                               SpendingLearner]:
    """A game run after its iterations (one evaluated: two deaths), its fast agent answering ``answer`` (None: an
    unusable answer)."""
    learner, llm = SpendingLearner([]), ScriptedLLM(answer)
    two = with_learner(tmp_path, describe, learner, chain_score=12.5)
    two.state.iterations = [{"iteration": 0, "frames": 5_000, "episodes": 2, "failed": DEAD, "score": 12.5,
                             "achievement_rates": RATES}]
    two.attempts.fast = FastAgent(llm, Env(), describe, SkillLibrary(tmp_path / "lib.json"), seed=two.ctx.seed,
                                  protocol=two.ctx.protocol)
    return two, llm, learner


def trained(two: TwoLoops) -> None:
    game_kept_plan.train(two.ctx, two.attempts, two.state.plan_proto(), FRAMES)


def test_the_prompt_is_the_games_its_deaths_and_rates_and_no_success_or_stage(tmp_path: Path, describe) -> None:
    two, llm, _ = game_run(tmp_path, describe, ANSWER)
    trained(two)
    [prompt] = llm.prompts
    # The game's measure and its own reward (the task's terms, as on_the_game sets them), in Describe's names.
    assert "The task is the whole of the game Crafter: it has no success condition." in prompt
    assert f"over its achievements ({', '.join(describe.achievements)})" in prompt
    assert "the planner always pays the game's own reward, the task's reward terms: native with weight 1, " \
           "weight times the game's own reward (no target)." in prompt
    # The kept plan's steps, as plan_text shows them.
    assert "1. wood:  (done when: achievement collect_wood)\n2. table:  (done when: achievement place_table)" in prompt
    # How the chain died (survival's text, where in the plan's steps, a trajectory end), not its advice to re-plan.
    assert ("Deaths in the whole game's last evaluation: 2 of 2 episodes ended with the player's death, after 300 "
            "frames on average (an episode lasts up to 10000 frames); by cause: zombie 1, arrow 1.") in prompt
    assert "Where: before table was done 1, after every sub-task of the plan was done 1." in prompt
    assert "The last lines of an episode that died of zombie: step 170 at (3, 4): health 3->1 (zombie) | end: " \
           "died (zombie)" in prompt
    assert "the plan may add sub-tasks" not in prompt
    assert "Its score: 12.5 (iteration 0). Achievements unlocked, with the percentage of episodes that unlocked " \
           "each: collect_wood 100%, place_table 50%. Never unlocked: collect_drink." in prompt
    # No success condition, no stage paid, no stage or success kind to add; every limit of the schema stated.
    for words in ("Success when", "the task succeeds", "the task's success", "each time a sub-task", "- stage:",
                  "- success:"):
        assert words not in prompt, words
    assert "macro_actions at most 3 entries" in prompt and "reward_terms at most 6 entries" in prompt
    assert "`skill_max_steps`, 1 to 200" in prompt and '"weight": -10 to 10' in prompt
    assert f"The policy trains for {FRAMES} frames in total" in prompt
    assert "unless your answer sets `hand_back_when_hurt` to false" in prompt


def test_the_answers_macro_actions_and_reward_terms_reach_the_config(tmp_path: Path, describe) -> None:
    two, _, learner = game_run(tmp_path, describe, ANSWER)
    trained(two)
    [config] = learner.configs
    assert [s.skill.split("__kept")[0] for s in config.plan] == ["wood", "table"]  # the plan's steps stay
    assert config.skills == ["crafter__kept_plan__keep_alive"] and config.skill_max_steps == 8
    assert list(config.primitive_actions) == ["noop", "move_left", "do"]
    assert [(t.kind, t.weight) for t in config.reward_terms] == [("native", 1.0), ("death", -2.0), ("health", 0.5)]
    assert config.plan_interrupt.damage  # the answer did not say: the game's default stays
    assert config.task.objective == "game" and not config.task.success and config.env_frames == FRAMES
    record = two.state.kept_plan
    assert record["config_by"] == "fast agent" and record["answer"]["macro_actions"][0]["code"] == SURVIVE
    assert record["macro_actions"] == ["crafter__kept_plan__keep_alive"] and record["skill_max_steps"] == 8
    assert record["steps"] == ["wood", "table"] and "config_error" not in record
    assert two.state.subtasks["crafter__kept_plan"].macro_actions == {"crafter__kept_plan__keep_alive": SURVIVE}


def test_an_answer_that_says_so_trains_without_handing_back_when_hurt(tmp_path: Path, describe) -> None:
    two, _, learner = game_run(tmp_path, describe, {**ANSWER, "hand_back_when_hurt": False})
    trained(two)
    assert not learner.configs[0].plan_interrupt.damage
    assert two.state.kept_plan["answer"]["hand_back_when_hurt"] is False


def defaults(config) -> bool:
    """The planner's defaults for B: the game's reward alone, every primitive, no macro action, hand back when
    hurt."""
    return ([(t.kind, t.weight) for t in config.reward_terms] == [("native", 1.0)] and not config.skills
            and config.skill_max_steps == 16 and config.plan_interrupt.damage and len(config.primitive_actions) == 0)


def test_an_unusable_answer_trains_the_defaults_and_says_why(tmp_path: Path, describe) -> None:
    two, llm, learner = game_run(tmp_path, describe, None)
    trained(two)
    assert len(llm.prompts) == 1 and defaults(learner.configs[0])
    record = two.state.kept_plan
    assert record["config_by"] == "planner defaults" and "no JSON object" in record["config_error"]
    [call] = sorted((two.ctx.run.dir / "llm").glob("*.json"))  # the call is recorded: a replay answers it
    assert call.name.endswith("-crafter__kept_plan-fast.json")


def test_the_one_agent_setup_trains_the_defaults_without_asking(tmp_path: Path, describe) -> None:
    two, llm, learner = game_run(tmp_path, describe, ANSWER)
    two.ctx.agents = AgentSetup.ONE
    trained(two)
    assert llm.prompts == [] and defaults(learner.configs[0])
    assert two.state.kept_plan["config_by"] == "planner defaults" and "config_error" not in two.state.kept_plan
