"""Recording sessions on real Crafter worlds, for the trajectory tests (unit and integration): make one, build a
scene, play actions, read the text."""

from services.env_server.backends.crafter import CrafterBackend
from services.env_server.sessions.actions import Action
from services.env_server.sessions.recording import recorder_for
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
    episode.trajectory = recorder_for(session.backend, session.task)
    episode.trajectory.start(env.perception(), env.nearby_text())


def play(session: Session, *names: str, times: int = 1) -> None:
    index = {a.name: i for i, a in enumerate(session.actions)}
    for _ in range(times):
        for name in names:
            session.step([index[name]])


def text(session: Session) -> str:
    return session.summary(0)["text"]
