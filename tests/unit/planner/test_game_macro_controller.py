"""The paper's final controller on a game task (services/planner/game_controller.py, issue 36 item 2): after the
iterations, APPO on the game's own reward and episodes with the plan's coded skills as macro actions, on the frames
left once the final evaluation and its own are kept back, scored on the iterations' worlds and kept as the final
controller only when it scores higher than the best chain there; the report says which won."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from fakes.fake_learner import FakeLearner
from test_game_measure import GAME, game_loops

from rlgpt import worlds
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner import game_controller, game_final, trainings
from services.planner.context import Stubs
from services.planner.report_game import controllers_lines

BUDGET = planner_pb2.Budgets(eval_episodes=2, total_env_frames=100_000)


class GameLearner(FakeLearner):
    """The fake learner whose evaluation episodes unlocked ``achievements`` each (a game's measure)."""

    def __init__(self, achievements: list[str]) -> None:
        super().__init__()
        self.achievements = achievements

    def Evaluate(self, request: learner_pb2.EvaluateRequest, timeout: float) -> learner_pb2.EvaluateResponse:
        self.evaluations.append(request)
        return learner_pb2.EvaluateResponse(episodes=[
            common_pb2.EpisodeSummary(achievements=self.achievements, steps=300, end_reason="death")] * 2)


class Env:
    def RegisterSkill(self, request: env_pb2.RegisterSkillRequest, **_: object) -> None:
        return None


def with_learner(tmp_path: Path, describe: env_pb2.DescribeResponse, learner: GameLearner | None,
                 chain_score: float | None = 1.0):
    two = game_loops(tmp_path, describe, env=Env(), budgets=BUDGET)
    two.ctx.stubs = Stubs(env=Env(), learner=learner, critic=None)
    two.state.best = {"iteration": 0, "score": chain_score, "successes": [False, False]}
    return two


def test_it_is_possible_only_for_a_game_run_with_a_learner_and_trains_only_with_frames(tmp_path: Path,
                                                                                       describe) -> None:
    two = with_learner(tmp_path, describe, GameLearner([]))
    plan = two.state.plan_proto()
    assert game_controller.possible(two.ctx, plan)
    left = two.ctx.frames_left()
    assert game_controller.training_frames(two.ctx) == left - 2 * 10_000  # its own evaluation kept back
    assert not game_controller.possible(with_learner(tmp_path / "b", describe, None).ctx, plan)  # no learner
    two.state.frames_used = 100_000 - 2 * 20_000 - trainings.MIN_FRAMES + 1  # too few frames left
    assert not game_final.enough(game_controller.training_frames(two.ctx))


def test_the_policy_trains_on_the_games_reward_with_the_coded_skills_and_wins_when_it_scores_higher(
        tmp_path: Path, describe) -> None:
    learner = GameLearner(["collect_wood", "place_table", "eat_cow"])
    two = with_learner(tmp_path, describe, learner, chain_score=0.5)
    game_controller.train(two.ctx, two.attempts, two.state.plan_proto())
    config = learner.configs[0]
    assert config.task.objective == "game" and config.episode_length == 10_000
    assert list(config.reward_terms) == list(GAME.reward_terms)
    assert sorted(config.skills) == sorted(f"{n}__chain{two.ctx.run.id[-6:]}" for n in ("wood", "table"))
    assert config.env_frames == 100_000 - 20_000 - 20_000  # the final evaluation's and its own kept back
    asked = learner.evaluations[0]
    assert asked.seed == worlds.iteration_worlds(two.ctx.seed)  # the chain's worlds: the comparison is paired
    record = two.state.game_controller
    assert record["macro_actions"] == ["table", "wood"] and record["chain_score"] == 0.5
    assert record["score"] > 0.5 and game_final.chosen(two.state).chosen == game_final.MACRO
    assert record["frames"] == two.state.subtasks[game_controller.controller_name("crafter")].frames > 0
    assert "The final controller: APPO on the game's reward" in "\n".join(controllers_lines(two.state))


def test_a_policy_that_does_not_score_higher_leaves_the_chain_the_final_controller(tmp_path: Path, describe) -> None:
    learner = GameLearner(["collect_wood"])
    two = with_learner(tmp_path, describe, learner, chain_score=50.0)
    game_controller.train(two.ctx, two.attempts, two.state.plan_proto())
    assert two.state.game_controller["score"] < 50.0 and game_final.chosen(two.state).chosen == game_final.CHAIN
    assert "The final controller: the best chain of the iterations" in "\n".join(controllers_lines(two.state))
    assert not game_controller.possible(two.ctx, two.state.plan_proto())  # trained once


class Refused(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INVALID_ARGUMENT

    def details(self) -> str:
        return "skills[0] is not registered"


class RefusingLearner(GameLearner):
    def StartTraining(self, request: learner_pb2.StartTrainingRequest) -> learner_pb2.StartTrainingResponse:
        raise Refused()


def test_a_refused_training_is_recorded_and_the_chain_stays(tmp_path: Path, describe) -> None:
    two = with_learner(tmp_path, describe, RefusingLearner([]))
    game_controller.train(two.ctx, two.attempts, two.state.plan_proto())
    record = two.state.game_controller
    assert record["error"].startswith("the learner refused the training") and "skills[0]" in record["error"]
    assert game_final.chosen(two.state).chosen == game_final.CHAIN
    assert "| not scored: the learner refused the training" in "\n".join(controllers_lines(two.state))


@pytest.mark.parametrize("ours, chain, expected", [(2.0, 1.0, "j1"), (1.0, 1.0, None), (0.5, None, "j1")])
def test_the_final_job_is_the_policy_only_when_it_scored_higher(tmp_path: Path, describe, ours, chain,
                                                               expected) -> None:
    two = with_learner(tmp_path, describe, GameLearner([]))
    two.state.game_controller = {"job_id": "j1", "score": ours, "chain_score": chain}
    two.state.best = None if chain is None else {"iteration": 0, "score": chain}
    choice = game_final.chosen(two.state)
    assert (choice.chosen == game_final.MACRO) == (expected == "j1")


class Registry(Env):
    """An env server that keeps what was registered with it."""

    def __init__(self) -> None:
        self.registered: dict[str, str] = {}

    def RegisterSkill(self, request: env_pb2.RegisterSkillRequest, **_: object) -> None:
        self.registered[request.name] = request.code


def test_a_resumed_run_registers_again_every_skill_its_trained_policies_call(tmp_path: Path, describe) -> None:
    """A real resumed run's final evaluation of its macro-action policy failed: the new env server had no skill
    named '<sub-task>__chain<run>' (the names its macro actions are registered under)."""
    learner = GameLearner(["collect_wood", "place_table", "eat_cow"])
    two = with_learner(tmp_path, describe, learner, chain_score=0.5)
    game_controller.train(two.ctx, two.attempts, two.state.plan_proto())
    two.ctx.stubs = Stubs(env=(fresh := Registry()), learner=learner, critic=None)  # the server after a restart
    two._register_known_skills()
    assert set(learner.configs[0].skills) <= set(fresh.registered)
    assert all(fresh.registered[name] for name in learner.configs[0].skills)  # with their code
