"""The whole game as a task over a real env server (issue 36): ResolveTask("crafter") spells out the benchmark's
objective, episode length and reward; an unknown task is NOT_FOUND listing the tasks offered; a skill test on the
resolved task plays until the player dies and never succeeds."""

from __future__ import annotations

import grpc
from env_server_support import rpc_error

from rlgpt.env_contract import GAME_OBJECTIVE
from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.skills.reference import COLLECT_WOOD

IDLE = "def skill(agent):\n    while True:\n        yield 'noop'\n"


def test_resolve_task_offers_the_whole_game(env_server) -> None:
    resolve = env_server.stub.ResolveTask
    game = resolve(env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name="crafter"))).task
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    assert game.objective == GAME_OBJECTIVE and not game.success and game.episode_length == 10000
    assert [(t.kind, t.weight) for t in game.reward_terms] == [("native", 1.0)]
    assert f"{len(describe.achievements)} achievements" in game.description
    # Achievements are tasks as before.
    wood = resolve(env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name="collect_wood"))).task
    assert [c.achievement for c in wood.success] == ["collect_wood"] and not wood.objective


def test_an_unknown_task_is_not_found_with_the_offered_tasks(env_server) -> None:
    code, details = rpc_error(env_server.stub.ResolveTask,
                              env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name="fly")))
    assert code == grpc.StatusCode.NOT_FOUND and details.startswith("no task 'fly' on crafter: crafter offers crafter")
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    assert all(name in details for name in describe.achievements) and len(details.encode()) < 2000


def test_minedojo_refuses_the_game_where_it_cannot_run(env_server) -> None:
    code, details = rpc_error(env_server.stub.ResolveTask,
                              env_pb2.ResolveTaskRequest(backend="minedojo", task=common_pb2.TaskSpec(name="crafter")))
    # Without the minedojo package this server has no MineDojo vocabulary; with it, NOT_FOUND (the unit tests).
    assert (code, details) == (grpc.StatusCode.FAILED_PRECONDITION,
                               "backend 'minedojo' has no vocabulary on this server") or \
        (code == grpc.StatusCode.NOT_FOUND and "minedojo offers no whole-game task" in details)


def test_a_game_episode_lasts_until_death_and_never_succeeds(env_server) -> None:
    stub = env_server.stub
    game = stub.ResolveTask(env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name="crafter"))).task
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="it_game_idle", code=IDLE, replace=True))
    run = stub.RunSkill(env_pb2.RunSkillRequest(skill="it_game_idle", episodes=1, seed=3, task=game,
                                                max_steps=game.episode_length,
                                                reward_terms=list(game.reward_terms)))
    episode = run.episodes[0]
    assert not episode.success and run.success_rate == 0.0
    assert episode.end_reason == "death" and 0 < episode.steps < game.episode_length
    assert episode.death_cause  # the benchmark's episodes end at death, not at a success


def test_a_game_plan_idles_on_after_its_stages_until_the_episode_ends(env_server) -> None:
    stub = env_server.stub
    game = stub.ResolveTask(env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name="crafter"))).task
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="it_game_wood", code=COLLECT_WOOD, replace=True))
    wood = env_pb2.Stage(success=[common_pb2.Condition(achievement="collect_wood")])
    for task, ends in ((game, "death"), (common_pb2.TaskSpec(), "skill_finished")):
        run = stub.RunSkill(env_pb2.RunSkillRequest(plan=["it_game_wood"], stages=[wood], episodes=1, seed=3,
                                                    task=task, max_steps=10000))
        episode = run.episodes[0]
        assert list(episode.stages_done) == [True] and "collect_wood" in episode.achievements
        # The whole game plays on after the plan (the benchmark's episodes); another task's plan stops there.
        assert episode.end_reason == ends, (task.name, episode.end_reason, episode.steps)
