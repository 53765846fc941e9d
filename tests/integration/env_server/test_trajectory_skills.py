"""The trajectory text of recording sessions (EpisodeSummary.text), on real Crafter worlds.

Seed 0's world has grass along the left map edge at (0, 29..48), water at (0..2, 24) and (3, 24) is grass.
"""

import re

from trajectory_support import make, play, scene, text

from services.env_server.tasks import Task

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
