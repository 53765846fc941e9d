"""The loops' pieces: plan rules, attempts' helpers, the controller's chain, the modes and the state's records
(the loops themselves run against real services in tests/integration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgpt.errors import FailedPrecondition
from rlgpt.prompts import shorten
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, planner_pb2
from services.planner.attempts import Attempts, increasing, measured_verdict, training_frames
from services.planner.context import AgentSetup, Mode, Stubs
from services.planner.controller import chain_links, chain_skill, coded_skills, rl_jobs
from services.planner.loops import TwoLoops
from services.planner.one_agent import OneAgent, PreWrittenFastAgent
from services.planner.plans import ending_in_goal, implied_items, start_inventory, summary, task_subtask
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import Decision, FinalResult, RunState, Status, SubTaskState, TestRecord

WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=2))
TABLE = common_pb2.Condition(achievement="place_table")


def test_training_frames_leave_a_share_for_later_rl_subtasks() -> None:
    assert training_frames(15000, None, 3) == 15000  # no run budget: the per-training budget
    assert training_frames(15000, 60000, 0) == 15000
    assert training_frames(15000, 30000, 1) == 15000  # half of what is left
    assert training_frames(15000, 20000, 1) == 10000
    assert training_frames(15000, 30000, 2) == 10000
    assert training_frames(15000, 9000, 0) == 9000  # the last sub-task takes what is left


def test_implied_items_come_from_the_rules(env_server) -> None:
    rules = env_server.stub.Describe(env_pb2.DescribeRequest()).rules
    items = {"wood", "stone", "sapling", "wood_pickaxe"}

    def left(*conditions: common_pb2.Condition) -> dict[str, int]:
        return implied_items(list(conditions), rules, items)

    wood_gift = next(i.count for r in rules.collect if r.material == "tree" for i in r.receives if i.item == "wood")
    assert left(common_pb2.Condition(achievement="collect_wood")) == {"wood": wood_gift}
    assert left(common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=5))) == {"wood": 5}
    assert left(common_pb2.Condition(achievement="make_wood_pickaxe")) == {"wood_pickaxe": 1}
    assert left(common_pb2.Condition(achievement="place_table")) == {}  # placing leaves nothing in the inventory
    assert left(common_pb2.Condition(achievement="collect_drink")) == {}  # drink is a status value, not an item
    assert left(common_pb2.Condition(achievement="eat_cow")) == {}
    assert implied_items([common_pb2.Condition(achievement="collect_wood")], common_pb2.WorldRules(), items) == {}
    # A sub-task starts with what every earlier one leaves (the largest count of each item).
    plan = planner_pb2.Plan(subtasks=[
        planner_pb2.SubTask(name="a", success=[common_pb2.Condition(achievement="collect_wood")]),
        planner_pb2.SubTask(name="b", success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood",
                                                                                                   count=3))]),
        planner_pb2.SubTask(name="c", success=[TABLE])])
    assert start_inventory(plan, plan.subtasks[0], rules, items) == []
    assert start_inventory(plan, plan.subtasks[2], rules, items) == [
        common_pb2.ItemCount(item="wood", count=max(3, wood_gift))]


def test_shorten_keeps_whole_sentences() -> None:
    feedback = ("The skill never found a tree in 3 of 4 episodes. It walked into water and turned back, again and "
                "again, for 200 frames. Explore when no tree is seen.")
    cut = shorten(feedback, 90)
    assert cut == "The skill never found a tree in 3 of 4 episodes. ..."
    assert shorten(feedback, 1000) == feedback
    words = shorten("a" * 10 + " " + "b" * 100, 40)
    assert words == "a" * 10 + " ..."
    assert len(shorten("x" * 100, 20)) <= 20


def test_the_slow_agents_summary_never_cuts_feedback_mid_sentence() -> None:
    feedback = "First sentence is here. " * 30 + "Last one."
    state = RunState(subtasks={"a": SubTaskState(name="a", status="failed", decision="rl", feedback=feedback)})
    text = summary(planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="a")]), state)
    assert text.startswith("- a (rl): failed, success 0%; First sentence is here.")
    assert text.endswith("First sentence is here. ...") and len(text) < 500


def test_a_plan_that_misses_the_goal_gets_the_task_appended_under_a_free_name() -> None:
    task = common_pb2.TaskSpec(name="place_table", description="place a table", success=[TABLE])  # as resolved
    goal = task_subtask(task, Decision.RL)
    assert list(goal.success) == [TABLE] and goal.decision == planner_pb2.DECISION_RL
    ending = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="wood", success=[WOOD]),
                                        planner_pb2.SubTask(name="table", success=[TABLE, WOOD])], rationale="r")
    assert ending_in_goal(planner_pb2.Plan(subtasks=ending.subtasks), goal) == planner_pb2.Plan(
        subtasks=ending.subtasks)  # the last sub-task reaches the goal: unchanged
    side_quest = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="place_table", success=[WOOD])],
                                  rationale="wood first")
    completed = ending_in_goal(side_quest, goal)
    assert [st.name for st in completed.subtasks] == ["place_table", "place_table_goal"]
    assert completed.subtasks[-1].decision == planner_pb2.DECISION_RL and list(completed.subtasks[-1].success) == [
        TABLE]
    assert completed.rationale.startswith("wood first | the task itself was appended")
    assert goal.name == "place_table"  # the caller's goal is not renamed
    empty = ending_in_goal(planner_pb2.Plan(), task_subtask(common_pb2.TaskSpec(name="x"), Decision.CODE))
    assert [st.name for st in empty.subtasks] == ["x"] and empty.rationale.startswith("the task itself")


def test_without_a_critic_the_verdict_is_the_measured_rate_and_the_first_error() -> None:
    won, lost = common_pb2.EpisodeSummary(success=True), common_pb2.EpisodeSummary(success=False)
    verdict = measured_verdict([won, lost, lost, lost], [common_pb2.SkillError(type="Timeout", message="slow"),
                                                         common_pb2.SkillError(type="Other", message="x")])
    assert not verdict.success and verdict.target == critic_pb2.TARGET_FAST and verdict.success_rate == 0.25
    assert verdict.diagnosis == "success rate 25%; error Timeout: slow"
    kept = measured_verdict([won, lost], [])
    assert kept.success and kept.target == critic_pb2.TARGET_KEEP and kept.diagnosis == "success rate 50%"
    assert measured_verdict([], []).success_rate == 0.0


def test_curves_sent_to_the_critic_have_increasing_frames() -> None:
    points = [critic_pb2.CurvePoint(env_frames=f) for f in (0, 100, 100, 50, 200)]
    assert [p.env_frames for p in increasing(points)] == [0, 100, 200]


def test_the_chain_runs_each_skill_in_order_and_renames_only_functions(env_server) -> None:
    first = ("def noop(agent):\n    yield 'do'\n\n"
             "def skill(agent):\n    # chop\n    yield from noop(agent)\n    yield 'noop'\n")
    second = "def helper(agent):\n    yield 'noop'\n\ndef place(agent):\n    yield from helper(agent)\n"
    source = chain_skill([("wood", first), ("table", second)])
    assert "def noop_0(agent)" in source and "yield from noop_0(agent)" in source
    assert "'noop_0'" not in source  # an action string equal to a function name stays an action
    assert "def helper_1(agent)" in source and "def place_1(agent)" in source
    assert source.rstrip().endswith("def skill(agent):\n    yield from skill_0(agent)\n    yield from place_1(agent)")
    assert source.index("# --- wood") < source.index("# --- table")
    # The env server accepts the chain (its checks, and a probe run on test worlds).
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="chain_test", code=source, replace=True))
    with pytest.raises(SyntaxError):
        chain_skill([("broken", "def skill(agent) yield 'do'")])
    with pytest.raises(SyntaxError, match="defines no function"):
        chain_skill([("nothing", "x = 1")])


def test_the_controller_picks_the_plans_coded_skills_and_trained_policies_in_order() -> None:
    plan = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name=n) for n in ("a", "b", "c")])
    state = RunState(subtasks={"a": SubTaskState(name="a", skill_code="def skill(agent): yield 'do'"),
                               "b": SubTaskState(name="b", decision="rl", job_id="j1"),
                               "c": SubTaskState(name="c", decision="rl")})
    assert coded_skills(plan, state) == [("a", "def skill(agent): yield 'do'")]
    assert rl_jobs(plan, state) == [("b", "j1")]
    assert rl_jobs(None, state) == [] and coded_skills(None, state) == []


def test_the_chain_has_a_link_per_subtask_with_a_controller_in_plan_order() -> None:
    plan = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="wood", success=[WOOD]),
                                      planner_pb2.SubTask(name="table", success=[TABLE]),
                                      planner_pb2.SubTask(name="later")])
    state = RunState(subtasks={"wood": SubTaskState(name="wood", skill_code="def skill(agent): yield 'do'"),
                               "table": SubTaskState(name="table", decision="rl", job_id="j1",
                                                     rl_config={"episode_length": 400}),
                               "later": SubTaskState(name="later", decision="rl")})
    links, missing = chain_links(plan, state, skill_frames=300, skill_names={"wood": "wood__chainabc"})
    assert [(link.name, link.WhichOneof("controller"), link.max_frames) for link in links] == [
        ("wood", "skill", 300), ("table", "job_id", 400)]
    assert links[0].skill == "wood__chainabc" and links[1].job_id == "j1"
    assert list(links[0].success) == [WOOD] and list(links[1].success) == [TABLE]
    assert missing == ["later"]  # an RL sub-task not trained yet has no controller


def test_records_keep_the_state_json_shape_of_earlier_runs(tmp_path: Path) -> None:
    old = {"subtasks": {"wood": {"name": "wood", "status": "done", "decision": "code", "tests": [
        {"iteration": 0, "kind": "code", "frames": 300, "success_rate": 1.0, "error": ""}]}},
        "iterations": [{"iteration": 0, "tokens": 10, "seconds": 1.5, "frames": 300}],
        "final": {"episodes": 8, "frames_used": 300, "controller": "chain of coded skills", "success_rate": 0.5,
                  "returns": [1.0]}}
    (tmp_path / "state.json").write_text(json.dumps(old))
    state = RunState.load(tmp_path)
    wood = state.subtasks["wood"]
    assert wood.status is Status.DONE and wood.decision is Decision.CODE and wood.last_error == ""
    wood.record(TestRecord(iteration=1, kind=Decision.RL, error="refused", frames=300))
    wood.record(TestRecord(iteration=1, kind=Decision.RL, job_id="j", success_rate=0.5, frames=900))
    state.save(tmp_path)
    saved = json.loads((tmp_path / "state.json").read_text())
    assert saved["subtasks"]["wood"]["status"] == "done" and saved["subtasks"]["wood"]["tests"] == [
        {"iteration": 0, "kind": "code", "frames": 300, "success_rate": 1.0, "error": ""},
        {"iteration": 1, "kind": "rl", "success_rate": 0.0, "frames": 300, "error": "refused"},
        {"iteration": 1, "kind": "rl", "success_rate": 0.5, "frames": 900, "error": "", "job_id": "j"}]
    assert saved["iterations"] == old["iterations"] and saved["final"] == old["final"]
    assert FinalResult(episodes=8, frames_used=3, controller="none").as_json() == {
        "episodes": 8, "frames_used": 3, "controller": "none", "success_rate": 0.0}
    (tmp_path / "state.json").write_text(json.dumps({"subtasks": {"x": {"name": "x", "status": "half"}}}))
    with pytest.raises(FailedPrecondition, match="corrupt"):
        RunState.load(tmp_path)


def loops(tmp_path: Path, mode: str = "", agents: str = "", task: str = "place_table", llm=None) -> TwoLoops:
    # The task as the planner keeps it: spelled out by the env server's ResolveTask when the run started.
    spec = common_pb2.TaskSpec(name=task, success=[common_pb2.Condition(achievement=task)])
    request = planner_pb2.StartRunRequest(task=spec, mode=mode, agents=agents)
    run = Run(tmp_path / "run", request)
    describe = env_pb2.DescribeResponse(backend="crafter", items=["wood"])
    return TwoLoops(run, RunState(), describe, llm, SkillLibrary(tmp_path / "library.json"),
                    Stubs(env=None, learner=None, critic=None), PlannerSettings(env_frames_per_training=900))


def test_the_run_context_resolves_budgets_mode_and_agents(tmp_path: Path) -> None:
    ctx = loops(tmp_path).ctx
    assert ctx.mode is Mode.RL_GPT and ctx.agents is AgentSetup.SLOW_FAST_CRITIC
    assert ctx.budgets.env_frames_per_training == 900 and ctx.protocol.env_frames == 900
    assert ctx.frames_left() == ctx.budgets.total_env_frames
    ctx.spend(SubTaskState(name="x"), ctx.budgets.total_env_frames + 5)
    assert ctx.frames_left() == 0


def test_pure_code_codes_every_subtask_of_the_plan(tmp_path: Path) -> None:
    two = loops(tmp_path, mode="pure-code")
    two._adopt_plan(planner_pb2.Plan(subtasks=[
        planner_pb2.SubTask(name="wood", success=[WOOD], decision=planner_pb2.DECISION_RL),
        planner_pb2.SubTask(name="table", success=[TABLE], decision=planner_pb2.DECISION_CODE)]))
    assert {n: s.decision for n, s in two.state.subtasks.items()} == {"wood": Decision.CODE, "table": Decision.CODE}
    assert json.loads((tmp_path / "run" / "state.json").read_text())["subtasks"]["wood"]["decision"] == "code"


def test_the_one_setup_has_one_agent_write_plan_code_and_configs(tmp_path: Path) -> None:
    two = loops(tmp_path, agents="one", llm=object())  # an LLM never called here
    assert isinstance(two.one, OneAgent) and isinstance(two.attempts.fast, PreWrittenFastAgent)
    assert loops(tmp_path / "b", agents="slow-fast", llm=object()).one is None
    # Without an LLM every setup has the whole task as its one sub-task (pure RL's plan).
    plan = loops(tmp_path / "c", agents="one")._new_plan(None)
    assert [st.name for st in plan.subtasks] == ["place_table"] and list(plan.subtasks[0].success) == [TABLE]


def test_rl_attempts_without_a_learner_go_back_to_the_slow_agent(tmp_path: Path) -> None:
    two = loops(tmp_path)
    state = SubTaskState(name="table", decision="rl")
    subtask = planner_pb2.SubTask(name="table", success=[TABLE])
    verdict = Attempts(two.ctx, None).rl(subtask, state, [], planner_pb2.Plan(subtasks=[subtask]))
    assert verdict.target == critic_pb2.TARGET_SLOW and "no learner" in state.feedback
