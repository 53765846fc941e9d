"""The trajectory text of recording sessions (EpisodeSummary.text), on real Crafter worlds.

Seed 0's world has grass along the left map edge at (0, 29..48), water at (0..2, 24) and (3, 24) is grass.
"""

import re

from services.env_server.backends.crafter import CrafterBackend
from services.env_server.sessions.actions import Action
from services.env_server.sessions.session import Session
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillRecord
from services.env_server.tasks import RewardTerm, Task

OPEN = Task(name="open", achievements=(), inventory=(), start_inventory=(), terminate_on_success=False)


def make(task: Task = OPEN, length: int = 1000, skill: str = "", skill_max_steps: int = 4) -> Session:
    backend = CrafterBackend()
    actions = [Action(name=n, primitive=i) for i, n in enumerate(backend.spec.actions)]
    if skill:
        actions.append(Action(name="skill:t", skill=SkillRecord(name="t", description="", code=skill,
                                                                 backend="crafter", version=1)))
    return Session(session_id="t", backend=backend, task=task, reward_terms=(RewardTerm("native", "", 1.0),),
                   seed=0, num_envs=1, episode_length=length, actions=actions, skill_max_steps=skill_max_steps,
                   autoreset=False, settings=EnvServerSettings(), record=True)


def scene(session: Session, pos: tuple[int, int], facing=(0, 1), creatures: bool = False) -> None:
    """Test hook: moves the player (crafter's World.move keeps the object map right), optionally alone."""
    env = session.slots[0].env
    world = env._env._world
    if not creatures:
        for obj in world.objects:
            if obj is not env._player:
                world.remove(obj)
    world.move(env._player, pos)
    env._player.facing = facing
    record_from_here(session)


def record_from_here(session: Session) -> None:
    """Restarts the episode's record from the scene a test built, as if the episode had started there."""
    env, episode = session.slots[0].env, session.slots[0].episode
    session.slots[0].changed()  # the test moved things behind the session's back
    episode.inventory, episode.health = env.inventory(), env.health()
    episode.trajectory = session._recorder()
    episode.trajectory.start(env.perception(), env.nearby_text())


def play(session: Session, *names: str, times: int = 1) -> None:
    index = {a.name: i for i, a in enumerate(session.actions)}
    for _ in range(times):
        for name in names:
            session.step([index[name]])


def text(session: Session) -> str:
    return session.summary(0)["text"]


SEEK_TABLE = '''
def skill(agent):
    while agent.facing_cell() != "table":
        yield agent.step_to("table")
'''


def test_a_skill_that_seeks_a_table_from_the_map_edge() -> None:
    task = Task(name="t", achievements=("make_wood_pickaxe",), inventory=(), start_inventory=(),
                terminate_on_success=True)
    session = make(task, skill=SEEK_TABLE, skill_max_steps=400)
    scene(session, (0, 33), creatures=True)
    session.slots[0].env._env._world[(22, 40)] = "table"
    out = session.step([len(session.actions) - 1])
    assert out.infos[0].get("skill_finished"), out.infos[0]
    lines = text(session).splitlines()
    assert any(re.search(r"table seen at \(22, 40\), reachable in \d+ moves", line) for line in lines), lines
    assert any(re.match(r"^step \d+ at \(\d+, \d+\)$", line) for line in lines)  # where the player went
    assert not [line for line in lines if re.match(r"^move_(left|right)/move_(left|right) x", line)], lines


def test_a_skill_that_returns_at_once_is_not_recorded_as_noop() -> None:
    """The padding frame of a skill that yields nothing is named for the skill (an RL policy may have no noop)."""
    session = make(skill="def skill(agent):\n    if agent.steps > 99:\n        yield 'noop'\n")
    play(session, "skill:t", times=5)
    trajectory = text(session)
    assert "skill:t (returned without acting) x5" in trajectory
    assert not re.search(r"^noop", trajectory, re.M)
    session.close()
