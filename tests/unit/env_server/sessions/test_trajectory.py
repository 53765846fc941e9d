"""The trajectory text of recording sessions (EpisodeSummary.text), on real Crafter worlds.

Seed 0's world has grass along the left map edge at (0, 29..48), water at (0..2, 24) and (3, 24) is grass.
"""

import re

from crafter import objects
from trajectory_support import make, play, record_from_here, scene, text

from services.critic.checks import dead_loop as _dead_loop
from services.env_server.sessions.trajectory import TrajectoryRecorder
from services.env_server.tasks import Task


def test_swinging_at_the_map_edge_is_one_line_the_critic_reads() -> None:
    session = make()
    scene(session, (0, 33))
    play(session, "move_left", "move_right", times=20)
    lines = text(session).splitlines()
    swings = [re.match(r"^move_left/move_right x(\d+) at \(0, 33\), map edge$", line) for line in lines]
    # One line, or a few when a creature wandering into view (a line of its own) cuts the run.
    assert sum(int(m.group(1)) for m in swings if m) == 40, lines
    assert _dead_loop("\n".join(lines), 20)[0] == "move_left/move_right"


def test_a_stuck_run_says_where_and_what_blocks_it() -> None:
    session = make()
    scene(session, (3, 24), facing=(0, 1))
    play(session, "move_left", times=12)  # water on the left: each move only turns the player
    play(session, "move_up", "move_down", times=1)
    lines = text(session).splitlines()
    assert lines[0] == "start: at (3, 24), near tree, water"
    assert "move_left x12 at (3, 24), facing water" in lines, lines
    assert "move_up" in lines and "move_down" in lines  # two alternating frames are no pattern yet


def test_needs_and_health_changes_come_with_their_cause() -> None:
    session = make()
    scene(session, (3, 24), facing=(-1, 0))  # facing water
    play(session, "noop", times=40)
    lines = text(session).splitlines()
    assert "noop x40 at (3, 24)" in lines, lines  # slow drifts do not cut an action run ...
    drift = lines[lines.index("noop x40 at (3, 24)") + 1]  # ... they follow it, merged
    assert re.match(r"^steps 21-\d+: drink 9->8 \(thirst\); food 9->8 \(hunger\); energy 9->8 \(fatigue\)$", drift)

    session = make()
    scene(session, (3, 24), facing=(-1, 0))
    session.slots[0].env._player.inventory["drink"] = 2
    record_from_here(session)
    play(session, "do")
    assert "step 1 at (3, 24): achievement collect_drink; drink 2->3 (drank water)" in text(session).splitlines()


def test_a_zombie_is_met_hits_and_kills_at_the_map_edge() -> None:
    session = make()
    scene(session, (0, 33), facing=(1, 0))
    world = session.slots[0].env._env._world
    player = session.slots[0].env._player
    world.add(objects.Zombie(world, (2, 33), player))
    player.health = 3
    record_from_here(session)
    index = {a.name: i for i, a in enumerate(session.actions)}
    for _ in range(60):
        out = session.step([index["noop"]])
        if out.terminated[0]:
            break
    summary = out.infos[0]["episode_summary"]
    lines = summary["text"].splitlines()
    assert summary["death_cause"] == "attacked by zombie"  # was "unknown": crafter's nearby() at x - 2 < 0
    assert lines[0] == "start: at (0, 33), near stone, tree, zombie, the map edge (left); zombie seen at (2, 33)"
    assert any(re.match(r"^step \d+ at \(0, 33\): health 3->1 \(zombie adjacent\)$", line) for line in lines), lines
    assert re.match(r"^step \d+ at \(0, 33\): health 1->0 \(zombie adjacent\)$", lines[-3]), lines
    assert lines[-2].startswith("end: death at step") and "zombie, the map edge (left)" in lines[-2]
    assert lines[-1] == "death: attacked by zombie"


def test_the_task_targets_are_watched() -> None:
    task = Task(name="t", achievements=("make_wood_pickaxe",), inventory=(), start_inventory=(),
                terminate_on_success=True)
    session = make(task)
    lines = text(session).splitlines()
    start = r"^start: at \(32, 32\), near .*; tree seen at \(\d+, \d+\), reachable in \d+ moves"
    assert re.match(start, lines[0]), lines
    assert "target table: never seen" in lines
    assert any(re.match(r"^target tree: first seen at step 0 at \(\d+, \d+\), nearest now", line) for line in lines)
    world = session.slots[0].env._env._world
    world[(34, 32)] = "table"  # in view two cells right of the player
    play(session, "noop")
    lines = text(session).splitlines()
    assert "step 1 at (32, 32): table seen at (34, 32), reachable in 1 move" in lines, lines


def test_text_is_bounded_and_keeps_the_start_and_the_end() -> None:
    session = make(length=2000)
    scene(session, (0, 33))
    world = session.slots[0].env._env._world
    for _ in range(90):
        play(session, "noop", "move_left", "do")  # no pattern of period 1 or 2: a line a frame
        for zombie in [o for o in world.objects if isinstance(o, objects.Zombie)]:
            world.remove(zombie)  # test hook: the night's zombies would end the episode early
    summary = session.summary(0)
    lines = summary["text"].splitlines()
    assert len(summary["text"]) <= 8000 and len(lines) <= 200
    assert lines[0].startswith("start: at (0, 33), near") and lines[-1].startswith("end: skill_finished at step 270")
    omitted = [line for line in lines if re.match(r"^\.\.\. \(\d+ lines omitted\) \.\.\.$", line)]
    assert len(omitted) == 1 and int(re.findall(r"\d+", omitted[0])[0]) >= 80


def test_recorder_bound_drops_the_middle_for_long_lines() -> None:
    recorder = TrajectoryRecorder(head_lines=10, tail_lines=10, max_chars=300)
    recorder.start({"position": [1, 1]}, "nothing notable")
    for step in range(1, 60):
        recorder.frame(step, "noop" if step % 3 else "do", {"position": [1, 1]}, {"wood": 1} if step % 3 == 0 else {},
                       {}, [])
    out = recorder.text(["end: time_limit at step 59, near nothing notable"])
    assert len(out) <= 300 and out.startswith("start: at (1, 1), near nothing notable")
    assert out.endswith("end: time_limit at step 59, near nothing notable") and "lines omitted" in out


def test_a_perception_without_a_map_view_still_gets_runs_positions_and_health() -> None:
    """MineDojo's perception: (x, y, z) position and life, no view: no sightings are claimed."""
    recorder = TrajectoryRecorder(["cow"])
    recorder.start({"position": [1.2, 64.0, 2.7], "life": 20.0}, "log")
    for step in range(1, 41):
        recorder.frame(step, "forward", {"position": [1.2 + step, 64.0, 2.7], "life": 20.0 - 2 * (step >= 30)},
                       {}, {}, [])
    assert recorder.text(["end: x"]).splitlines() == [
        "start: at (1, 3), near log", "forward x25", "step 25 at (26, 3)", "forward x5",
        "step 30 at (31, 3): life 20->18 (cause not seen)", "forward x10", "end: x"]


