"""bench-game over a real env server: a recorded run's coded chain (docs/runs/claude-relay-make_wood_pickaxe)
scored on 2 held-out worlds of the whole game, declared in the raw file before any episode is played, each episode
as the planner's own all-code evaluation plays it (RunSkill's plan), the section computed from the raw file, and a
second scoring of the same worlds refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format

from benchmarks.crafter.report import crafter_section
from benchmarks.game import raw
from benchmarks.game.controller import CODE_PLAN, read_controller
from benchmarks.game.play import game_task
from benchmarks.game.scoring import score
from benchmarks.game.sets import SetRefused, run_world_ranges
from rlgpt import worlds
from rlgpt.game_score import crafter_score, success_rates
from rlgpt.v1 import common_pb2, env_pb2
from services.planner.state import RunState

RUN = Path(__file__).resolve().parents[3] / "docs" / "runs" / "claude-relay-make_wood_pickaxe"
LENGTH = 400
"""Episodes shorter than the game's 10,000 frames, so that the test stays short (the raw file says so)."""


def test_a_coded_chain_is_declared_then_scored_on_two_worlds_once(env_server, tmp_path: Path) -> None:
    target = f"127.0.0.1:{env_server.port}"
    controller = read_controller(RUN, tmp_path / "jobs")
    assert controller.kind == CODE_PLAN
    used = run_world_ranges(controller.seed, RunState.load(RUN), tmp_path / "jobs")
    path = raw.raw_file(tmp_path, "wood")
    seen: list[dict] = []

    def on_change() -> None:  # the raw file as the section would be written from it, at each change
        seen.append(json.loads(path.read_text())["scorings"][0])

    doc = score(controller, target, tmp_path, "wood", 0, 2, used, episode_length=LENGTH, on_change=on_change)
    first = worlds.game_bench_worlds(controller.seed, 0)
    # Declared (its worlds written) before a single episode was played, then scored.
    assert [(s["status"], s["first_seed"], len(s.get("episodes", []))) for s in seen] == [
        ("declared", first, 0), ("scored", first, 2)]
    scoring = json.loads(path.read_text())["scorings"][0]
    assert scoring == doc["scorings"][0] and scoring["episode_length"] == LENGTH
    assert len(scoring["achievements"]) == 22 and scoring["apart_from"][0][0] == "skill tests"
    episodes = scoring["episodes"]
    assert [e["seed"] for e in episodes] == [first, first + 1]
    assert all(0 < e["length"] <= LENGTH and e["end"] in ("death", "time_limit") for e in episodes)

    # Each episode is what the planner's own evaluation of an all-code chain gives on that world.
    task, _ = game_task(target, LENGTH)
    planned = env_server.stub.RunSkill(env_pb2.RunSkillRequest(
        plan=[skill for skill, _ in controller.plan], episodes=2, seed=first, max_steps=LENGTH, task=task,
        stages=[env_pb2.Stage(success=[json_format.ParseDict(c, common_pb2.Condition()) for c in success])
                for _, success in controller.plan]))
    assert [(list(e.achievements), e.steps, e.end_reason) for e in planned.episodes] == [
        (e["achievements"], e["length"], e["end"]) for e in episodes]

    # The section's numbers are the raw episodes' (rlgpt/game_score.py).
    rates = success_rates([e["achievements"] for e in episodes], scoring["achievements"])
    section = crafter_section(None, raw.load_all(tmp_path), None)
    assert f"| 2 of 2 | {crafter_score(rates):.1f} |" in section
    assert f"Episodes of at most {LENGTH} frames, not the benchmark's 10,000." in section

    with pytest.raises(SetRefused, match=r"scored already.*--set 1"):
        score(controller, target, tmp_path, "wood-again", 0, 2, used, episode_length=LENGTH)


def test_guards_join_a_coded_chain_as_bench_validate_adds_them(env_server, tmp_path: Path) -> None:
    """play() with guards: their take-overs are in the episode's trajectory; without them, none. (The chain is done
    by frame 20 and a guard interrupts only a running skill: this one fires at the first, food 9 below 10.)"""
    from benchmarks.game.play import play, register

    target = f"127.0.0.1:{env_server.port}"
    controller = read_controller(RUN, tmp_path / "jobs")
    register(target, {**controller.skills, "guard_wait_3": "def skill(agent):\n    for _ in range(3):\n"
                                                           "        yield 'noop'\n"})
    task, _ = game_task(target, 60)
    guard = common_pb2.Guard(skill="guard_wait_3", when=[common_pb2.Threshold(label="status/food", value=10)],
                             max_frames=10)
    first = worlds.validation_worlds(controller.seed)
    (guarded,) = play(controller, target, task, first, 1, [guard]).episodes
    (alone,) = play(controller, target, task, first, 1).episodes
    assert "step 0: guard guard_wait_3 takes over (status/food 9 < 10)" in guarded.text
    assert "guard guard_wait_3 returned after 3 frames, hands back" in guarded.text
    assert "guard" not in alone.text
