"""A game task's final controller (services/planner/game_final.py, issue 36 item 2): after the iterations the
policy with the plan's coded skills as macro actions (A) and the policy around the kept plan (B) train on the
game's own reward, on the frames left split between them (A half of what both evaluations leave, B the rest), each
scored on the iterations' worlds; the highest of the chain, A and B becomes the final controller, as an event and
in the report."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_game_macro_controller import GameLearner, with_learner
from test_game_measure import GAME, FakeEnv

from rlgpt import worlds
from rlgpt.v1 import learner_pb2, planner_pb2
from services.planner import game_final, game_kept_plan, game_task
from services.planner.report_game import achievements_section, measure_text
from services.planner.state import Decision, RunState, SubTaskState
from services.planner.trainings import MIN_FRAMES

EVALUATION = 2 * 10_000
"""One evaluation's frames kept back: BUDGET's 2 episodes x the game's 10,000."""
SPENT = 2 * 300
"""What one evaluation of the fake learner spends (2 episodes that die after 300 frames)."""


class SpendingLearner(GameLearner):
    """A training that spends the frames its config gives it."""

    def WatchJob(self, request: learner_pb2.WatchJobRequest, timeout: float) -> list[learner_pb2.JobProgress]:
        frames = self.configs[int(request.job_id[1:]) - 1].env_frames
        return [learner_pb2.JobProgress(job_id=request.job_id, env_frames=frames,
                                        state=learner_pb2.JOB_STATE_SUCCEEDED)]


def test_a_game_run_trains_both_controllers_on_the_games_reward_half_each(tmp_path: Path, describe) -> None:
    learner = SpendingLearner(["collect_wood"])
    two = with_learner(tmp_path, describe, learner)
    two._keep_plan()  # the loops' step after the iterations
    macro, kept = learner.configs
    left = 100_000 - EVALUATION  # the final evaluation kept back
    assert macro.env_frames == (left - EVALUATION) // 2 == 30_000 and macro.skills  # A: half, its evaluation kept
    assert two.state.game_controller["frames"] == macro.env_frames + SPENT  # its training and its evaluation
    # A's evaluation measured 300-frame episodes: later evaluations keep back 2 episodes x the floor cap of 1,000
    # (twice the longest, at least EVALUATION_FLOOR), not 2 x 10,000: B gets all the rest.
    held = 2 * game_task.EVALUATION_FLOOR
    assert two.state.longest_episode == 300 and two.ctx.evaluation_hold() == held
    assert kept.env_frames == 100_000 - macro.env_frames - SPENT - 2 * held == 65_400  # B: the rest
    # B: the plan's two coded steps as one macro action, paid the game's own reward over the game's episodes.
    assert [s.skill.split("__kept")[0] for s in kept.plan] == ["wood", "table"] and not kept.skills
    assert list(kept.reward_terms) == list(GAME.reward_terms) and kept.episode_length == 10_000
    assert kept.task.objective == "game" and not kept.task.success and not kept.task.terminate_on_success
    assert kept.plan_interrupt.damage and kept.plan_prior > 0
    assert [e.seed for e in learner.evaluations] == [worlds.iteration_worlds(two.ctx.seed)] * 2  # the chain's
    record = two.state.kept_plan
    assert record["steps"] == ["wood", "table"] and record["chain_score"] == 1.0 and "score" in record
    assert record["frames"] == kept.env_frames + SPENT and record["env_frames"] == kept.env_frames
    # Every frame counted; left: the final evaluation's and what B's evaluation did not spend of its share.
    assert two.state.frames_used == 100_000 - held - (held - SPENT)
    assert [e.episode_length for e in learner.evaluations] == [10_000, 1_000]  # B's episodes: at most the cap


def test_with_frames_for_one_training_only_the_macro_action_policy_trains(tmp_path: Path, describe) -> None:
    learner = SpendingLearner([])
    two = with_learner(tmp_path, describe, learner)
    two.state.longest_episode = 300  # measured: evaluations keep back 2 x 1,000 frames
    held = 2 * game_task.EVALUATION_FLOOR
    two.state.frames_used = 100_000 - held - (held + 2 * MIN_FRAMES - 1)  # halves below MIN_FRAMES
    game_final.train(two.ctx, two.attempts, two.state.plan_proto())
    [macro] = learner.configs
    assert macro.env_frames == 2 * MIN_FRAMES - 1  # all but its evaluation
    assert two.state.kept_plan is None  # what A left is less than B's evaluation


def test_a_plan_without_code_trains_only_around_the_kept_plan_with_all_the_frames(tmp_path: Path, describe) -> None:
    learner = SpendingLearner([])
    two = with_learner(tmp_path, describe, learner)
    for sub in two.state.subtasks.values():  # both sub-tasks trained by RL: no coded skill, two policies
        sub.decision, sub.skill_code, sub.job_id = Decision.RL, "", f"policy-{sub.name}"
    left = two.ctx.frames_left()
    game_final.train(two.ctx, two.attempts, two.state.plan_proto())
    [kept] = learner.configs
    assert [s.job_id for s in kept.plan] == ["policy-wood", "policy-table"]
    assert kept.env_frames == left - EVALUATION and two.state.game_controller is None


def test_kept_plans_off_or_a_plan_with_no_controller_train_no_policy_around_it(tmp_path: Path, describe) -> None:
    two = with_learner(tmp_path, describe, GameLearner([]))
    plan = two.state.plan_proto()
    assert game_kept_plan.possible(two.ctx, plan)
    for sub in two.state.subtasks.values():
        sub.skill_code = ""
    assert not game_kept_plan.possible(two.ctx, plan) and not game_kept_plan.steps(plan, two.state).subtasks
    off = with_learner(tmp_path / "off", describe, GameLearner([]))
    off.ctx.settings = dataclasses.replace(off.ctx.settings, keep_plan=False)
    assert not game_kept_plan.possible(off.ctx, plan)


@pytest.mark.parametrize("chain, macro, kept, expected", [
    (1.0, 2.0, 3.0, game_final.KEPT), (1.0, 3.0, 2.0, game_final.MACRO), (3.0, 2.0, 1.0, game_final.CHAIN),
    (2.0, 2.0, 2.0, game_final.CHAIN), (1.0, 2.0, 2.0, game_final.MACRO), (None, None, 0.5, game_final.KEPT),
    (1.0, None, None, game_final.CHAIN)])
def test_the_highest_score_on_the_same_worlds_is_chosen_the_earlier_among_equals(
        tmp_path: Path, describe, chain, macro, kept, expected) -> None:
    two = with_learner(tmp_path, describe, GameLearner([]), chain_score=chain)
    two.state.game_controller = {"chain_score": chain, "job_id": "jA", "score": macro, "frames": 7}
    two.state.kept_plan = {"chain_score": chain, "job_id": "jB", "score": kept, "frames": 9} if kept is not None \
        else {"chain_score": chain, "error": "the learner refused the training: no", "frames": 0}
    choice = game_final.chosen(two.state)
    assert choice.chosen == expected
    assert [c.name for c in choice.controllers] == [game_final.CHAIN, game_final.MACRO, game_final.KEPT]
    assert [c.frames for c in choice.controllers][1:] == [7, 9 if kept is not None else 0]


def test_the_final_evaluation_plays_the_chosen_policy_and_the_event_names_every_candidate(
        tmp_path: Path, describe) -> None:
    learner = GameLearner(["collect_wood", "place_table"])
    two = with_learner(tmp_path, describe, learner, chain_score=0.5)
    two.state.iterations = [{"iteration": 0, "frames": 1234}]
    two.state.game_controller = {"chain_score": 0.5, "job_id": "jA", "score": 1.0, "frames": 7_000}
    two.state.kept_plan = {"chain_score": 0.5, "job_id": "jB", "score": 2.0, "frames": 8_000}
    result = game_final.evaluate(two.ctx, episodes=2, seed=worlds.final_worlds(two.ctx.seed))
    [asked] = learner.evaluations
    assert asked.job_id == "jB" and asked.episode_length == 10_000 and asked.seed == worlds.final_worlds(two.ctx.seed)
    assert result.controller.startswith("kept plan: the plan's chain with policy jB") and result.score > 0
    [event] = [e for e in two.ctx.run.events if e.WhichOneof("payload") == "final_controllers"]
    assert event.final_controllers.chosen == game_final.KEPT
    assert [(c.name, round(c.score, 1), c.frames, c.job_id) for c in event.final_controllers.controllers] == [
        ("chain", 0.5, 1234, ""), ("macro actions", 1.0, 7000, "jA"), ("kept plan", 2.0, 8000, "jB")]
    text = "\n".join(achievements_section(two.state))
    assert "| RL around the kept plan on the game's reward" in text and "| 2.0 | 8,000 | jB |" in text
    assert "The final controller: RL around the kept plan on the game's reward" in text


def test_the_chain_chosen_plays_its_final_evaluation_as_before(tmp_path: Path, describe) -> None:
    env = FakeEnv([(["collect_wood"], 300)] * 2)
    two = with_learner(tmp_path, describe, GameLearner([]), chain_score=5.0)
    two.ctx.stubs.env = env
    two.state.game_controller = {"chain_score": 5.0, "job_id": "jA", "score": 1.0, "frames": 7_000}
    result = game_final.evaluate(two.ctx, episodes=2, seed=worlds.final_worlds(two.ctx.seed))
    assert result.controller == "chain of coded skills" and env.asked[0].seed == worlds.final_worlds(two.ctx.seed)


def test_the_achievements_table_has_a_column_per_trained_policy(tmp_path: Path, describe) -> None:
    two = with_learner(tmp_path, describe, GameLearner([]))
    rates = {name: 0.0 for name in describe.achievements}
    two.state.iterations = [{"iteration": 0, "frames": 10, "score": 0.0, "achievement_rates": rates}]
    two.state.game_controller = {"chain_score": 0.0, "job_id": "jA", "score": 0.0, "achievement_rates": rates}
    two.state.kept_plan = {"chain_score": 0.0, "job_id": "jB", "score": 0.0, "achievement_rates": rates}
    assert "| achievement | iteration 0 | macro-action policy | kept-plan policy |" in achievements_section(two.state)
    assert planner_pb2.RunEvent(final_controllers=game_final.chosen(two.state)).final_controllers.chosen == "chain"


def test_the_sub_tasks_table_gives_a_candidate_its_score_not_a_success_rate() -> None:
    """A candidate has no success condition: its 0% success read as a failed sub-task in a real run's report."""
    state = RunState(game_controller={"chain_score": 46.2, "job_id": "jA", "score": 26.2})
    macro = SubTaskState(name="crafter__macro_actions", decision=Decision.RL)
    kept = SubTaskState(name="crafter__kept_plan", decision=Decision.RL)
    wood = SubTaskState(name="collect_wood", decision=Decision.CODE, success_rate=1.0)
    assert [measure_text(state, "crafter", s) for s in (macro, kept, wood)] == ["score 26.2", "score n/a", "100%"]
