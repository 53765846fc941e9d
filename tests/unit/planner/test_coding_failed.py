"""What coding failed stays RL (services/planner/coding_failed.py), and an RL link behind code that failed its tests
never leaves the frames unspent (services/planner/inner_loops.py): that link, moved to RL, trains first in the same
iteration while the RL link waits keeping its share, and where that link trains no further the RL link trains from
the rules' start items. bench-rlgpt's
collect_stone (0% of 32, 428 of 20,000 frames): a re-plan made make_wood_pickaxe code again after its coded attempts
failed, and collect_stone_goal waited behind it in both outer iterations."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_loops import WOOD, Log, rl_loops

from rlgpt.llm.client import CallRecord
from rlgpt.v1 import common_pb2, critic_pb2, planner_pb2
from services.planner import coding_failed
from services.planner.loops import TwoLoops
from services.planner.plans import summary
from services.planner.state import Decision, RunState, Status, SubTaskState, TestRecord

PICKAXE = common_pb2.Condition(achievement="make_wood_pickaxe")
STONE = common_pb2.Condition(achievement="collect_stone")
CODE, RL = planner_pb2.DECISION_CODE, planner_pb2.DECISION_RL


def subtask(name: str, condition: common_pb2.Condition, decision: int) -> planner_pb2.SubTask:
    return planner_pb2.SubTask(name=name, success=[condition], decision=decision)


class ScriptedSlow:
    """A test double of the slow agent: its plans in turn (the last one again), and the feedback it was given."""

    def __init__(self, *plans: planner_pb2.Plan) -> None:
        self.plans, self.feedback = list(plans), []

    def plan(self, task: common_pb2.TaskSpec, *, iteration: int = 0, previous: planner_pb2.Plan | None = None,
             feedback: str = "") -> tuple[planner_pb2.Plan, CallRecord]:
        self.feedback.append(feedback)
        plan = planner_pb2.Plan()
        plan.CopyFrom(self.plans[min(iteration, len(self.plans) - 1)])
        return plan, CallRecord(seq=0, agent="slow", iteration=iteration, model="fake", messages=[], response="{}",
                                parsed={}, prompt_tokens=1, completion_tokens=1, latency_seconds=0.0, attempts=1)


def failing_code(log: Log):
    """The fast agent's coded attempts, each below the pass bar (as Attempts.code records them)."""

    def code(st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount],
             plan: Any) -> critic_pb2.Verdict:
        log.add("code", st.name)
        passed = st.name == "wood"
        if not passed:
            state.code_failures += 1
        state.skill_code = f"def {st.name}(agent):\n    yield 'noop'\n"
        state.record(TestRecord(iteration=0, kind=Decision.CODE, success_rate=float(passed)))
        return critic_pb2.Verdict(success=passed, success_rate=float(passed), diagnosis=f"code of {st.name}",
                                  target=critic_pb2.TARGET_KEEP if passed else critic_pb2.TARGET_FAST)

    return code


def stone_run(tmp_path: Path, second: planner_pb2.Plan) -> tuple[TwoLoops, Log, ScriptedSlow]:
    """collect_stone's plan (wood coded, make_wood_pickaxe coded and failing, the goal RL) over two outer
    iterations; ``second``: the slow agent's re-plan. The whole task's evaluation only hands the summary back."""
    first = planner_pb2.Plan(subtasks=[subtask("wood", WOOD, CODE), subtask("make_wood_pickaxe", PICKAXE, CODE),
                                       subtask("collect_stone_goal", STONE, RL)])
    two, log = rl_loops(tmp_path, parallel_trainings=2, max_inner_iterations=2)
    two.state.plan, two.state.subtasks = None, {}
    two.slow, two.check_plans = ScriptedSlow(first, second), False
    two.attempts.code = failing_code(log)
    two.ctx.budgets.max_outer_iterations = 2
    two.ctx.run.request.task.CopyFrom(common_pb2.TaskSpec(name="collect_stone", success=[STONE]))
    two.ctx.stubs.env = SimpleNamespace(RegisterSkill=lambda request, **_: log.add("register", request.name))

    def evaluate(record: Any, plan: planner_pb2.Plan) -> None:
        two.state.slow_feedback = summary(plan, two.state)

    two._evaluate_iteration = evaluate
    two._keep_plan = lambda: None  # RL around the kept plan is tested apart
    return two, log, two.slow


def test_a_replan_that_codes_what_coding_failed_keeps_it_rl_and_the_frames_go_to_it_first(tmp_path: Path) -> None:
    # The re-plan codes make_wood_pickaxe again (as the rules' repair did in the bench).
    second = planner_pb2.Plan(subtasks=[subtask("wood", WOOD, CODE), subtask("make_wood_pickaxe", PICKAXE, CODE),
                                        subtask("collect_stone_goal", STONE, RL)], rationale="code it")
    two, log, slow = stone_run(tmp_path, second)
    two._iterate()
    assert two.state.coding_failed == {"achievement make_wood_pickaxe": {
        "subtask": "make_wood_pickaxe", "iteration": 0, "attempts": 2, "best": 0.0}}
    assert log.names("code") == ["wood", "make_wood_pickaxe", "make_wood_pickaxe"]  # not coded in iteration 1
    plans = [e.plan for e in two.ctx.run.events if e.HasField("plan")][-2:]  # after the doubles' own plan
    assert plans[1].subtasks[1].decision == RL and two.state.subtasks["make_wood_pickaxe"].decision is Decision.RL
    assert plans[1].rationale == (
        "code it | kept rl by the planner: make_wood_pickaxe (coding failed for these conditions in iteration 0 "
        "(make_wood_pickaxe: 2 coded attempts, the best at 0%))")
    # Iteration 0: the pickaxe, moved to RL, trains first (the goal waits behind it), then the goal (its link
    # before it is a policy now: from the rules' start items); iteration 1: both together.
    pickaxe, goal = "make_wood_pickaxe", "collect_stone_goal"
    assert log.names("config") == [pickaxe, pickaxe, goal, goal, pickaxe, goal, pickaxe, goal]
    assert log.at("evaluate", pickaxe) < log.at("start", goal)
    assert [e.config.name for e in two.ctx.run.events if e.HasField("config")][:2] == [pickaxe, pickaxe]
    learner = two.ctx.stubs.learner
    assert learner.configs[f"job-{pickaxe}"].prefix and not learner.configs[f"job-{goal}"].prefix
    assert two.state.frames_used > 0
    assert "make_wood_pickaxe (rl): failed, success 0%; verdict on make_wood_pickaxe; kept rl by the planner: " \
        "coding failed for these conditions in iteration 0" in slow.feedback[1]  # the slow agent read why


def test_only_conditions_coding_failed_are_kept_rl() -> None:
    state = RunState(subtasks={"pickaxe": SubTaskState(name="pickaxe", decision="rl", tests=[
        {"iteration": 0, "kind": "code", "success_rate": 0.25}, {"iteration": 0, "kind": "code", "success_rate": 0.0},
        {"iteration": 1, "kind": "rl", "success_rate": 0.9}])})
    coding_failed.remember(state, subtask("pickaxe", PICKAXE, CODE), state.subtasks["pickaxe"])
    assert state.coding_failed["achievement make_wood_pickaxe"]["attempts"] == 2
    assert state.coding_failed["achievement make_wood_pickaxe"]["best"] == 0.25
    plan = planner_pb2.Plan(subtasks=[subtask("wood", WOOD, CODE), subtask("p2", PICKAXE, CODE),
                                      planner_pb2.SubTask(name="both", success=[STONE, PICKAXE], decision=CODE)])
    kept = coding_failed.kept_rl(plan, state)
    assert [st.decision for st in kept.subtasks] == [CODE, RL, CODE]  # other conditions are the plan's own
    assert kept.rationale.startswith("kept rl by the planner: p2 (coding failed")
    assert coding_failed.kept_rl(planner_pb2.Plan(subtasks=[subtask("p3", PICKAXE, RL)]), state).rationale == ""
    assert coding_failed.conditions_key([STONE, PICKAXE]) == coding_failed.conditions_key([PICKAXE, STONE])


@pytest.mark.parametrize("given", ["both", "pickaxe"])
def test_a_link_waits_while_the_failed_link_before_it_trains_first_and_keeps_its_share(tmp_path: Path,
                                                                                       given: str) -> None:
    """The table's code failed and it moved to RL: in the iteration's RL links ("both"), or moved this iteration
    ("pickaxe": only the pickaxe was RL as the iteration began), it trains first and the pickaxe waits behind it."""
    two, log = rl_loops(tmp_path, agents="slow-fast", parallel_trainings=2, max_inner_iterations=1,
                        total_env_frames=1200, success=1.0)  # no critic: the measured rate passes
    plan = two.state.plan_proto()
    table = two.state.subtasks["table"]
    table.skill_code, table.status = "def skill(agent):\n    yield 'noop'\n", Status.FAILED  # code at 0%, moved to RL
    two.ctx.stubs.env = SimpleNamespace(RegisterSkill=lambda request, **_: None)
    two._train_rl(list(plan.subtasks) if given == "both" else [plan.subtasks[1]], plan)
    # Half of the frames each (the old code offered the table 900, leaving the pickaxe 300, or never trained it).
    assert two.attempts.fast.offers == [("table", 600), ("pickaxe", 600)]
    assert log.at("evaluate", "table") <= log.at("start", "pickaxe")
    assert all(two.state.subtasks[n].status is Status.DONE for n in ("table", "pickaxe"))


def test_a_link_behind_code_that_failed_its_tests_trains_from_the_start_items_then_behind_the_chain(
        tmp_path: Path) -> None:
    """The failed link does not train this iteration (still coded: the slow agent revises it): the link after it
    trains from the rules' start items, not behind that code (whose episodes never hand it over), and says so;
    once that link is done, it trains behind the chain."""
    two, log = rl_loops(tmp_path, parallel_trainings=2, max_inner_iterations=1, meet=True)
    plan = two.state.plan_proto()
    table = two.state.subtasks["table"]
    table.skill_code, table.status = "def skill(agent):\n    yield 'noop'\n", Status.FAILED
    table.decision = Decision.CODE  # its code failed and went back to the slow agent: not moved to RL
    registered: list[str] = []
    two.ctx.stubs.env = SimpleNamespace(RegisterSkill=lambda request, **_: registered.append(request.name))
    two._train_rl([plan.subtasks[1]], plan)
    pickaxe = two.state.subtasks["pickaxe"]
    assert log.names("start") == ["pickaxe"] and not registered and two.state.frames_used > 0
    assert not two.ctx.stubs.learner.configs["job-pickaxe"].prefix
    assert pickaxe.feedback == ("trained from the rules' start items, not behind the chain: table, before it in "
                                "the plan, is not done (its code failed its tests) and trains no further this "
                                "iteration, so the chain cannot hand it over. verdict on pickaxe")
    table.status = Status.DONE
    two._train_rl([plan.subtasks[1]], plan)
    assert registered and registered[0].startswith("table__chain")  # its prefix: the chain hands it over
    assert log.names("start") == ["pickaxe", "pickaxe"] and two.ctx.stubs.learner.configs["job-pickaxe"].prefix

