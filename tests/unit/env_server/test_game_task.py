"""The whole game as a task (issue 36): the env server resolves the backend's game task by name, with its
objective, the benchmark's episode length and reward; an unknown name is NOT_FOUND listing what is offered; a
backend without a whole-game task (MineDojo) says so."""

from __future__ import annotations

from typing import Any

import pytest

from rlgpt.env_contract import GAME_OBJECTIVE
from rlgpt.errors import InvalidArgument, NotFound
from rlgpt.v1 import common_pb2
from services.env_server.backends.crafter import CrafterBackend
from services.env_server.backends.minedojo import MineDojoBackend, MineDojoSettings
from services.env_server.tasks import parse_task, resolve_task

SPEC = CrafterBackend.spec


def test_the_game_task_resolves_to_the_benchmark() -> None:
    resolved = resolve_task(common_pb2.TaskSpec(name="crafter", description="crafter"), SPEC)
    assert resolved.objective == GAME_OBJECTIVE and not resolved.success
    assert resolved.episode_length == SPEC.default_episode_length == 10000
    assert [(t.kind, t.target, t.weight) for t in resolved.reward_terms] == [("native", "", 1.0)]
    assert "22 achievements" in resolved.description and "score" in resolved.description
    task = parse_task(resolved, SPEC)  # a session takes the resolved task: open-ended, it never succeeds
    assert task.open_ended and not task.holds(set(SPEC.achievements), {})


def test_the_game_task_keeps_what_the_request_chose() -> None:
    asked = common_pb2.TaskSpec(name="crafter", description="play it all", episode_length=500,
                                reward_terms=[common_pb2.RewardTerm(kind="achievement", target="*", weight=1.0)])
    resolved = resolve_task(asked, SPEC)
    assert resolved.description == "play it all" and resolved.episode_length == 500
    assert [t.kind for t in resolved.reward_terms] == ["achievement"]


def test_a_task_named_like_the_game_with_conditions_is_the_users() -> None:
    wood = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))
    resolved = resolve_task(common_pb2.TaskSpec(name="crafter", success=[wood]), SPEC)
    assert resolved.objective == "" and list(resolved.success) == [wood]


def test_achievements_still_resolve() -> None:
    resolved = resolve_task(common_pb2.TaskSpec(name="collect_wood"), SPEC)
    assert [c.achievement for c in resolved.success] == ["collect_wood"] and resolved.objective == ""


def test_an_unknown_task_is_not_found_listing_the_offered_tasks() -> None:
    with pytest.raises(NotFound) as info:
        resolve_task(common_pb2.TaskSpec(name="fly"), SPEC)
    text = str(info.value)
    assert text.startswith("no task 'fly' on crafter: crafter offers crafter (the whole game")
    assert all(name in text for name in SPEC.achievements) and "task.success" in text


@pytest.mark.parametrize(("spec", "needle"), [
    (common_pb2.TaskSpec(name="crafter", objective="win"), "task.objective 'win': must be empty or 'game'"),
    (common_pb2.TaskSpec(name="collect_wood", objective="game"), "is the whole game's (task 'crafter'"),
    (common_pb2.TaskSpec(name="crafter", episode_length=-1), "task.episode_length=-1"),
    (common_pb2.TaskSpec(name="crafter", reward_terms=[common_pb2.RewardTerm(kind="joy")]), "unknown kind 'joy'"),
])
def test_bad_game_task_fields_are_invalid(spec: common_pb2.TaskSpec, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle.replace("(", r"\(").replace(".", r"\.")):
        resolve_task(spec, SPEC)


def test_minedojo_offers_no_whole_game_task(fake: Any) -> None:
    spec = MineDojoBackend(MineDojoSettings()).spec
    assert spec.game_task == ""
    with pytest.raises(NotFound, match="no task 'crafter' on minedojo: minedojo offers no whole-game task; its "
                                       "achievements: "):
        resolve_task(common_pb2.TaskSpec(name="crafter"), spec)
    with pytest.raises(InvalidArgument, match="offers no whole-game task"):
        resolve_task(common_pb2.TaskSpec(name="obtain_stick", objective="game", success=[
            common_pb2.Condition(inventory=common_pb2.ItemCount(item="stick", count=1))]), spec)
