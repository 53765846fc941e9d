"""A session's prefix in process, on real Crafter worlds with deaths made to order (the backend's step reports
one in the worlds a test names): a prefix whose player dies runs again in the next world, at most three tries, then
the client gets the last try's world afresh; an animated episode starts at the client's first observation."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.backends.crafter import CrafterEnv
from services.env_server.sessions.prefix import MAX_TRIES
from services.env_server.sessions.session import Session
from services.env_server.sessions.session_builder import build_session
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillRegistry

SETTINGS = EnvServerSettings(skill_call_seconds=1.5, skill_memory_mb=512)
WOOD_1 = '''
def skill(agent):
    while agent.inventory["wood"] < 1:
        action = agent.step_to("tree")
        yield action if action is not None else "do"
'''
PREFIX = [common_pb2.PrefixStep(skill="wood", max_frames=300, success=[
    common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=1))])]


@pytest.fixture
def skills() -> SkillRegistry:
    registry = SkillRegistry(SETTINGS)
    registry.put("wood", "", WOOD_1, "crafter", replace=False)
    return registry


@pytest.fixture
def doomed(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The world seeds whose every frame reports the player dead (fill it before the session is made)."""
    seeds: set[int] = set()
    original = CrafterEnv.step

    def step(self: CrafterEnv, action: int):  # type: ignore[no-untyped-def]
        raw = original(self, action)
        return dataclasses.replace(raw, dead=True) if self._env._seed in seeds else raw

    monkeypatch.setattr(CrafterEnv, "step", step)
    return seeds


@pytest.fixture
def sessions(skills: SkillRegistry) -> Iterator[list[Session]]:
    made: list[Session] = []
    yield made
    for session in made:
        session.close()


def session(sessions: list[Session], skills: SkillRegistry, seed: int, **fields) -> Session:  # type: ignore[no-untyped-def]
    made = build_session(SETTINGS, skills, f"t{len(sessions)}", env_pb2.CreateSessionRequest(
        num_envs=1, seed=seed, **fields))
    sessions.append(made)
    return made


def test_a_death_in_the_prefix_runs_it_again_in_the_next_world(doomed, skills, sessions) -> None:
    doomed.add(3)
    retried = session(sessions, skills, seed=3, prefix=PREFIX)
    doomed.clear()
    plain = session(sessions, skills, seed=4, prefix=PREFIX)  # the next world of env 0 of seed 3
    assert retried.slots[0].seed == 4
    assert retried.prefix_frames([0]) == [1 + plain.prefix_frames([0])[0]]  # the dead try's frame counts
    assert (retried.slots[0].image == plain.slots[0].image).all()
    assert retried.slots[0].episode.inventory["wood"] == 1 and not retried.slots[0].episode.in_prefix


def test_after_the_last_try_the_client_gets_its_world_afresh(doomed, skills, sessions) -> None:
    doomed.update({3, 4, 5})
    given_up = session(sessions, skills, seed=3, prefix=PREFIX)
    fresh = session(sessions, skills, seed=5)
    slot = given_up.slots[0]
    assert MAX_TRIES == 3 and slot.seed == 5 and given_up.prefix_frames([0]) == [3]
    assert (slot.image == fresh.slots[0].image).all() and slot.episode.inventory.get("wood", 0) == 0
    assert slot.episode.steps == slot.episode.prefix_steps == 3 and slot.episode.end_reason == ""


def test_an_animation_starts_at_the_clients_first_observation(skills, sessions) -> None:
    animated = session(sessions, skills, seed=3, prefix=PREFIX, animate=1, record_trajectories=True,
                       episode_length=2)
    prefix = animated.prefix_frames([0])[0]
    animated.step([0])
    assert animated.slots[0].animation.sample()[0] == [prefix, prefix + 1]
    out = animated.step([0])
    assert out.truncated[0] and out.infos[0]["episode_summary"]["animation"].startswith(b"GIF89a")
