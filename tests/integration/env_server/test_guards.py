"""Guards over a real gRPC channel on real Crafter worlds: a guard takes over from a running skill when its trigger
starts to hold, hands back when it returns, fails or spends its frames, and the interrupted skill goes on where it
was; it fires on its trigger's edge, again in each new episode, and it guards a session's prefix too."""

from __future__ import annotations

import pytest

from rlgpt.tensors import from_tensor
from rlgpt.v1 import common_pb2, env_pb2

pytestmark = pytest.mark.usefixtures("no_leftover_sessions")

WAIT_40 = '''
def skill(agent):
    for _ in range(40):
        yield "noop"
'''
DO_5 = '''
def skill(agent):
    for _ in range(5):
        yield "do"
'''
FAIL = '''
def skill(agent):
    yield "do"
    raise ValueError("no water in view")
'''
FOREVER = '''
def skill(agent):
    while True:
        yield "do"
'''
LEFT_3 = '''
def skill(agent):
    for _ in range(3):
        yield "move_left"
'''
THIRSTY = [common_pb2.Threshold(label="status/drink", value=9)]
"""Fires once drink first drops below its start of 9: at frame 21 in Crafter (thirst grows 1 a frame, 20 a drink)."""
NEVER = [common_pb2.Condition(achievement="collect_diamond")]


@pytest.fixture(scope="module")
def skills(env_server) -> None:
    for name, code in (("guard_wait_40", WAIT_40), ("guard_do_5", DO_5), ("guard_fail", FAIL),
                       ("guard_forever", FOREVER), ("guard_left_3", LEFT_3)):
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True))


def guard(skill: str, max_frames: int = 50) -> common_pb2.Guard:
    return common_pb2.Guard(skill=skill, when=THIRSTY, max_frames=max_frames)


def played(env_server, guards: list[common_pb2.Guard]) -> common_pb2.EpisodeSummary:
    """One RunSkill episode of guard_wait_40 with ``guards``."""
    response = env_server.stub.RunSkill(env_pb2.RunSkillRequest(skill="guard_wait_40", episodes=1, seed=3,
                                                                max_steps=100, guards=guards))
    return response.episodes[0]


def lines_with(text: str, part: str) -> list[str]:
    return [line for line in text.splitlines() if part in line]


@pytest.mark.usefixtures("skills")
def test_a_guard_takes_over_and_the_interrupted_skill_goes_on_where_it_was(env_server) -> None:
    alone = played(env_server, [])
    assert alone.steps == 40 and not lines_with(alone.text, "guard")
    episode = played(env_server, [guard("guard_do_5")])
    # 40 of the skill's own frames and the guard's 5: the skill was resumed with its loop's count, not restarted
    assert episode.steps == 45 and not episode.error.type, episode.text
    assert lines_with(episode.text, "guard guard_do_5 takes over (status/drink 8 < 9)")[0].startswith("step 21:")
    assert lines_with(episode.text, "guard guard_do_5 returned after 5 frames, hands back")[0].startswith("step 26:")
    assert len(lines_with(episode.text, "takes over")) == 1  # drink stays below 9: the trigger did not start again


@pytest.mark.usefixtures("skills")
def test_a_failing_guard_is_reported_in_the_trajectory_and_the_skill_goes_on(env_server) -> None:
    episode = played(env_server, [guard("guard_fail")])
    assert episode.steps == 41 and not episode.error.type, episode.text  # the guard's error is not the skill's
    (line,) = lines_with(episode.text, "guard guard_fail failed after 1 frames")
    assert 'ValueError at line 4: no water in view [raise ValueError("no water in view")], hands back' in line


@pytest.mark.usefixtures("skills")
def test_a_guard_that_does_not_return_hands_back_after_its_max_frames(env_server) -> None:
    episode = played(env_server, [guard("guard_forever", max_frames=7)])
    assert episode.steps == 47, episode.text
    assert lines_with(episode.text, "guard guard_forever spent its 7 frames, hands back")


@pytest.mark.usefixtures("skills")
def test_every_guard_is_ready_again_in_a_new_episode(env_server) -> None:
    """An episode that ends while its guard runs stops it; the next episode's trigger fires it again."""
    stub = env_server.stub
    session = stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=3, skills=["guard_wait_40"], guards=[guard("guard_forever")], episode_length=24,
        autoreset=True, record_trajectories=True, skill_max_steps=40))
    action = len(session.actions) - 1
    ended = []
    while len(ended) < 2:
        step = stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=[action]))
        if step.infos[0].was_reset:
            ended.append(step.infos[0].episode)
    for episode in ended:
        assert episode.end_reason == "time_limit" and episode.steps == 24
        assert lines_with(episode.text, "guard guard_forever takes over")[0].startswith("step 21:"), episode.text


@pytest.mark.usefixtures("skills")
def test_a_guard_guards_the_sessions_prefix(env_server) -> None:
    """The prefix's skill waits; the guard turns the player left within the prefix, so the first observation the
    client gets faces left (facing/x -1), where without the guard it faces down as at the reset."""
    stub = env_server.stub
    prefix = [common_pb2.PrefixStep(skill="guard_wait_40", success=NEVER, max_frames=40)]

    def facing_x(guards: list[common_pb2.Guard]) -> float:
        session = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, seed=3, prefix=prefix, guards=guards))
        labels = list(next(field for field in session.observation if field.name == "vector").labels)
        assert list(session.observations.prefix_frames) == [40]  # the guard's frames are the prefix step's
        return float(from_tensor(session.observations.vector)[0, labels.index("facing/x")])

    assert facing_x([]) == 0.0
    assert facing_x([guard("guard_left_3")]) == -1.0


@pytest.mark.usefixtures("skills")
def test_a_trigger_that_starts_while_another_guard_runs_fires_after_it(env_server) -> None:
    """The first guard (food below 10: from the first frame) waits 30 frames; drink drops below 9 at frame 21,
    while it runs; the second guard takes over as soon as the first hands back, before the skill's next frame."""
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(
        name="guard_wait_30", code="def skill(agent):\n    for _ in range(30):\n        yield 'noop'\n", replace=True))
    hungry = common_pb2.Guard(skill="guard_wait_30", when=[common_pb2.Threshold(label="status/food", value=10)],
                              max_frames=50)
    episode = played(env_server, [hungry, guard("guard_do_5")])
    assert episode.steps == 40 + 30 + 5, episode.text
    assert lines_with(episode.text, "guard guard_wait_30 takes over (status/food 9 < 10)")[0].startswith("step 0:")
    assert lines_with(episode.text, "guard guard_do_5 takes over (status/drink 8 < 9)")[0].startswith("step 30:")


@pytest.mark.usefixtures("skills")
def test_a_threshold_with_above_holds_above_its_value(env_server) -> None:
    daylight = common_pb2.Guard(skill="guard_do_5", max_frames=50,
                                when=[common_pb2.Threshold(label="world/daylight", value=0.5, above=True)])
    episode = played(env_server, [daylight])
    assert episode.steps == 45 and lines_with(episode.text, "takes over (world/daylight")[0].startswith("step 0:")
