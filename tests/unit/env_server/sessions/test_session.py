"""Session semantics in-process: termination, autoreset, stepping a finished env, and when stages are done."""

import pytest

from rlgpt.errors import FailedPrecondition
from services.env_server.backends.crafter import CrafterBackend
from services.env_server.messages import episode_summary_proto
from services.env_server.sessions.actions import Action
from services.env_server.sessions.session import Session
from services.env_server.settings import EnvServerSettings
from services.env_server.tasks import RewardTerm, Task


def make(task: Task, autoreset: bool, length: int = 100) -> Session:
    backend = CrafterBackend()
    actions = [Action(name=n, primitive=i) for i, n in enumerate(backend.spec.actions)]
    return Session(session_id="t", backend=backend, task=task, reward_terms=(RewardTerm("native", "", 1.0),),
                   seed=0, num_envs=2, episode_length=length, actions=actions, skill_max_steps=4,
                   autoreset=autoreset, settings=EnvServerSettings())


def test_success_terminates_when_asked() -> None:
    # Start with 2 wood; "success" = hold >= 2 wood, so the first frame succeeds and terminates.
    task = Task(name="t", achievements=(), inventory=(("wood", 2),), start_inventory=(("wood", 2),),
                terminate_on_success=True)
    session = make(task, autoreset=False)
    out = session.step([0, 0])
    assert out.terminated.tolist() == [True, True] and out.infos[0]["end_reason"] == "success"
    with pytest.raises(FailedPrecondition, match="Reset"):
        session.step([0, 0])
    session.reset([0, 1])
    assert session.step([0, 0]).frames.tolist() == [1, 1]


def test_open_ended_task_truncates_and_autoresets() -> None:
    task = Task(name="open", achievements=(), inventory=(), start_inventory=(), terminate_on_success=False)
    session = make(task, autoreset=True, length=2)
    session.step([0, 0])
    out = session.step([0, 0])
    assert out.truncated.tolist() == [True, True] and not out.terminated.any()
    assert out.infos[0]["was_reset"] and session.slots[0].episode.steps == 0
    assert out.infos[0]["success"] is False


def test_stepping_some_envs_leaves_the_others_as_they_were() -> None:
    """A rollout worker's splits step their own envs of one session (``indices``); rows follow their order."""
    task = Task(name="open", achievements=(), inventory=(), start_inventory=(), terminate_on_success=False)
    session = make(task, autoreset=True, length=2)
    untouched = session.slots[0].image.copy()
    out = session.step([0], indices=[1])
    assert out.frames.tolist() == [1] and len(out.infos) == 1
    assert session.slots[0].episode.steps == 0 and session.slots[1].episode.steps == 1
    out = session.step([0], indices=[1])  # env 1 reaches its time limit and is reset; env 0 is not
    assert out.truncated.tolist() == [True] and out.infos[0]["was_reset"]
    assert (session.slots[0].image == untouched).all() and session.slots[0].episode.steps == 0
    out = session.step([3, 0], indices=[1, 0])
    assert out.frames.tolist() == [1, 1] and session.slots[0].episode.steps == session.slots[1].episode.steps == 1
    assert session.total_frames == 4


def test_a_recording_session_summarises_each_episode_and_starts_a_fresh_record() -> None:
    backend = CrafterBackend()
    actions = [Action(name=n, primitive=i) for i, n in enumerate(backend.spec.actions)]
    task = Task(name="open", achievements=(), inventory=(), start_inventory=(), terminate_on_success=False)
    session = Session(session_id="t", backend=backend, task=task, reward_terms=(RewardTerm("native", "", 1.0),),
                      seed=0, num_envs=1, episode_length=3, actions=actions, skill_max_steps=4, autoreset=True,
                      settings=EnvServerSettings(), record=True)
    for _ in range(2):
        out = session.step([0])
    assert "episode_summary" not in out.infos[0]
    out = session.step([0])
    summary = out.infos[0]["episode_summary"]
    assert summary["text"].splitlines() == ["start: at (32, 32), near nothing notable; cow seen at (36, 32)",
                                            "noop x3", "end: time_limit at step 3, near nothing notable"]
    assert out.infos[0]["was_reset"] and session.slots[0].episode.steps == 0
    assert session.summary(0)["text"].startswith("start: at (32, 32)")  # the next episode's own record
    assert make(Task(name="t", achievements=(), inventory=(), start_inventory=(), terminate_on_success=False),
                autoreset=False).slots[0].episode.trajectory is None  # only recording sessions keep one


def test_a_session_says_the_step_each_stage_first_held() -> None:
    backend = CrafterBackend()
    actions = [Action(name=n, primitive=i) for i, n in enumerate(backend.spec.actions)]
    task = Task(name="open", achievements=(), inventory=(), start_inventory=(("wood", 2),), terminate_on_success=False)
    stages = tuple(Task(name=f"s{n}", achievements=(), inventory=((item, n),), start_inventory=(),
                        terminate_on_success=False) for item, n in (("wood", 2), ("wood", 3), ("stone", 1)))
    session = Session(session_id="t", backend=backend, task=task, reward_terms=(RewardTerm("native", "", 1.0),),
                      seed=0, num_envs=1, episode_length=10, actions=actions, skill_max_steps=4, autoreset=False,
                      settings=EnvServerSettings(), record=True, stages=stages)
    assert session.slots[0].episode.stage_frames == [0, 0, 0]
    session.step([0])  # wood 2 from the start: held at the first step
    session.step([0])
    session.slots[0].env.give("wood", 1)  # wood 3 from here: held at the next step, the third
    for _ in range(3):
        session.step([0])
    summary = session.summary(0)
    assert summary["stages_done"] == [True, True, False] and summary["stage_frames"] == [1, 3, 0]
    assert list(episode_summary_proto(summary).stage_frames) == [1, 3, 0]
    session.reset([0])
    assert session.slots[0].episode.stage_frames == [0, 0, 0]  # a new episode's own
