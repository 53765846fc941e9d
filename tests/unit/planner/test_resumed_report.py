"""A resumed run's report counts the whole run: an outer iteration that a pause split across two planner processes
shows the tokens, frames and working seconds of both parts (test doubles of the fast agent's attempts; a clock
moved by hand)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from rlgpt.errors import Unavailable
from rlgpt.llm.client import CallRecord
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, planner_pb2
from services.planner.context import Stubs
from services.planner.loops import TwoLoops
from services.planner.report import write_run_report
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState, SubTaskState

PLAN = planner_pb2.Plan(subtasks=[
    planner_pb2.SubTask(name=name, decision=planner_pb2.DECISION_CODE, success=[common_pb2.Condition(achievement=a)])
    for name, a in (("wood", "collect_wood"), ("table", "place_table"))])


class Clock:
    """``time.time`` moved by hand: the work takes what the test says, a pause lasts an hour."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def loops_of(run: Run, state: RunState, tmp_path: Path) -> TwoLoops:
    """The outer loop of ``run``, one outer iteration, the chain's evaluation left out (the controller's, tested
    apart)."""
    two = TwoLoops(run, state, env_pb2.DescribeResponse(backend="crafter", items=["wood"]), None,
                   SkillLibrary(tmp_path / "library.json"), Stubs(env=None, learner=None, critic=None),
                   PlannerSettings(max_outer_iterations=1))
    two._evaluate_iteration = lambda record, plan: None
    return two


def attempt(two: TwoLoops, clock: Clock, *, seconds: float, tokens: int, frames: int, pause: bool = False):
    """A coded attempt of the fast agent: an LLM call, a skill test's frames; ``pause``: the critic fails after
    them (the run pauses, resumable)."""

    def code(st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount],
             plan: Any) -> critic_pb2.Verdict:
        clock.now += seconds
        two.ctx.run.llm_call(CallRecord(seq=0, agent="fast", iteration=0, model="m", messages=[], response="{}",
                                        parsed={}, prompt_tokens=tokens, completion_tokens=0, latency_seconds=1.0,
                                        attempts=1), st.name)
        two.ctx.spend(state, frames)
        if pause:
            raise Unavailable("the critic did not answer")
        return critic_pb2.Verdict(success=True, success_rate=1.0, target=critic_pb2.TARGET_KEEP)
    return code


def test_an_iteration_split_by_a_pause_counts_both_parts_in_the_report(tmp_path: Path, monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(time, "time", clock)
    request = planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="place_table", success=[
        common_pb2.Condition(achievement="place_table")]))
    first = loops_of(Run(tmp_path / "run", request), RunState(), tmp_path)
    first._adopt_plan(PLAN)
    calls = iter([attempt(first, clock, seconds=10, tokens=100, frames=30),  # wood: done
                  attempt(first, clock, seconds=5, tokens=50, frames=20, pause=True)])  # table: the critic fails
    first.attempts.code = lambda st, state, start, plan: next(calls)(st, state, start, plan)
    with pytest.raises(Unavailable):
        first._iterate()
    first.ctx.run.emit(error=planner_pb2.ErrorEvent(message="paused", resumable=True))  # as the servicer does
    clock.now += 3600  # the run lies paused for an hour

    run = Run.resume(tmp_path / "run")
    second = loops_of(run, RunState.load(run.dir), tmp_path)
    second.attempts.code = attempt(second, clock, seconds=20, tokens=70, frames=40)  # table again: done
    second._iterate()
    [row] = second.state.iterations
    # 100 + 50 + 70 tokens (the paused attempt's call was made and paid); the frames the state kept (the paused
    # attempt's test was not saved and is redone); 10 + 5 + 20 working seconds, not the hour paused.
    assert (row["tokens"], row["frames"], row["seconds"]) == (220, 70, 35.0)
    assert row["frames"] == second.state.frames_used  # the run's only iteration spent all of its frames
    text = write_run_report(run.dir).read_text()
    assert "| 0 | 220 | 35 | 70 |" in text
