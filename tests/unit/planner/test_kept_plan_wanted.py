"""RL around a kept plan is wanted only while the chain is below the run's target: a run whose whole task reached
its target ends there (issue 35), as `make run` did before kept plans applied to every chain (a seed-0 run at 84%
against its 80% target went on training for 22,000 frames and 8 minutes)."""

from __future__ import annotations

from pathlib import Path

from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner import kept_plan
from services.planner.context import Stubs
from services.planner.loops import TwoLoops
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState, Status

PICKAXE = common_pb2.Condition(achievement="make_wood_pickaxe")
PLAN = planner_pb2.Plan(subtasks=[
    planner_pb2.SubTask(name="pickaxe", decision=planner_pb2.DECISION_CODE, success=[PICKAXE])])


def loops(tmp_path: Path) -> TwoLoops:
    request = planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="make_wood_pickaxe", success=[PICKAXE]))
    two = TwoLoops(Run(tmp_path / "run", request), RunState(), env_pb2.DescribeResponse(backend="crafter"), None,
                   SkillLibrary(tmp_path / "library.json"), Stubs(env=None, learner=object(), critic=None),
                   PlannerSettings(target_success=0.8))
    two._adopt_plan(PLAN)
    sub = two.state.subtasks["pickaxe"]
    sub.status, sub.skill_code = Status.DONE, "def skill(agent):\n    yield 'noop'\n"
    return two


def test_a_chain_at_its_target_trains_no_policy_around_it_and_one_below_does(tmp_path: Path) -> None:
    two = loops(tmp_path)
    assert not kept_plan.wanted(two.ctx, PLAN, 0.84)  # 27 of 32 >= 80%: the run ends
    assert kept_plan.wanted(two.ctx, PLAN, 0.75)
    assert not kept_plan.wanted(two.ctx, PLAN, 1.0) and not kept_plan.wanted(two.ctx, PLAN, None)
