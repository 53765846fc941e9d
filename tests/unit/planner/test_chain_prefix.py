"""A sub-task trains (RL) or is tested (code) where its chain hands over: the plan's earlier coded links become the
env server's prefix of its episodes, and the fast agent and the critic read that its episodes start there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.agents.answers import SkillCandidate
from services.planner.attempts import chain_prefix
from services.planner.context import Stubs
from services.planner.loops import TwoLoops
from services.planner.prompts import EvalProtocol
from services.planner.runs import Run
from services.planner.schemas import SkillAnswer
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState, Status

WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))
TABLE = common_pb2.Condition(achievement="place_table")
PICKAXE = common_pb2.Condition(achievement="make_wood_pickaxe")
PLAN = planner_pb2.Plan(subtasks=[
    planner_pb2.SubTask(name="wood", decision=planner_pb2.DECISION_CODE, success=[WOOD]),
    planner_pb2.SubTask(name="table", decision=planner_pb2.DECISION_CODE, success=[TABLE]),
    planner_pb2.SubTask(name="pickaxe", decision=planner_pb2.DECISION_RL, success=[PICKAXE])])


class RecordingEnv:
    """Test double of the env server's RegisterSkill: keeps what was registered."""

    def __init__(self) -> None:
        self.registered: dict[str, str] = {}

    def RegisterSkill(self, request: env_pb2.RegisterSkillRequest, **_: Any) -> env_pb2.RegisterSkillResponse:
        self.registered[request.name] = request.code
        return env_pb2.RegisterSkillResponse()


def plan_loops(tmp_path: Path) -> TwoLoops:
    request = planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="make_wood_pickaxe", success=[PICKAXE]))
    two = TwoLoops(Run(tmp_path / "run", request), RunState(), env_pb2.DescribeResponse(backend="crafter"), None,
                   SkillLibrary(tmp_path / "library.json"), Stubs(env=RecordingEnv(), learner=None, critic=None),
                   PlannerSettings(test_steps=250))
    two._adopt_plan(PLAN)
    for name in ("wood", "table"):
        sub = two.state.subtasks[name]
        sub.status, sub.skill_code = Status.DONE, f"def {name}(agent):\n    yield 'noop'\n"
    return two


def test_the_earlier_coded_links_are_the_rl_subtasks_prefix(tmp_path: Path) -> None:
    two = plan_loops(tmp_path)
    prefix = chain_prefix(two.ctx, PLAN, PLAN.subtasks[2])
    assert [(list(step.success), step.max_frames) for step in prefix] == [([WOOD], 250), ([TABLE], 250)]
    registered = two.ctx.stubs.env.registered
    assert [registered[step.skill] for step in prefix] == [two.state.subtasks[n].skill_code for n in ("wood", "table")]
    assert chain_prefix(two.ctx, PLAN, PLAN.subtasks[0]) == []  # the first link starts at the reset


def test_no_prefix_when_an_earlier_link_is_a_policy_or_has_no_code(tmp_path: Path) -> None:
    two = plan_loops(tmp_path)
    two.state.subtasks["table"].decision, two.state.subtasks["table"].job_id = "rl", "job-1"
    assert chain_prefix(two.ctx, PLAN, PLAN.subtasks[2]) == []  # the env server cannot run a policy
    two.state.subtasks["table"].decision, two.state.subtasks["table"].job_id = "code", ""
    two.state.subtasks["table"].skill_code = ""
    assert chain_prefix(two.ctx, PLAN, PLAN.subtasks[2]) == []


def test_the_agents_read_that_episodes_start_where_the_chain_hands_over() -> None:
    protocol = EvalProtocol()
    behind = protocol.rl_test([common_pb2.ItemCount(item="wood", count=3)], 9000, after=["wood", "table"])
    assert "the coded skills of the sub-tasks before this one (wood, table) run first" in behind
    assert "starts holding" not in behind and "9000 frames" in behind
    assert protocol.judge_text("rl", [], 9000, ["wood", "table"]) == behind
    alone = protocol.rl_test([common_pb2.ItemCount(item="wood", count=3)], 9000)
    assert "the player starts holding: 3 wood" in alone


class RecordingFast:
    """Test double of the fast agent: one candidate that passed its test, and the arguments it was asked with."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def write_skill(self, subtask: planner_pb2.SubTask, **kwargs: Any) -> list[SkillCandidate]:
        self.asked.append(kwargs)
        answer = SkillAnswer(name=subtask.name, description="waits", code="def skill(agent):\n    yield 'noop'\n")
        return [SkillCandidate(0, answer, 1.0, episodes=[common_pb2.EpisodeSummary(success=True, steps=90)])]


def test_a_coded_link_is_tested_behind_the_earlier_coded_links_and_is_told_so(tmp_path: Path) -> None:
    two = plan_loops(tmp_path)
    plan = planner_pb2.Plan()
    plan.CopyFrom(PLAN)
    plan.subtasks[2].decision = planner_pb2.DECISION_CODE
    fast = two.attempts.fast = RecordingFast()
    two.attempts.code(plan.subtasks[2], two.state.subtasks["pickaxe"], [common_pb2.ItemCount(item="wood", count=3)],
                      plan)
    asked = fast.asked[-1]
    assert [list(step.success) for step in asked["prefix"]] == [[WOOD], [TABLE]]
    assert asked["after"] == ["wood", "table"] and asked["start_inventory"] == []  # the links hand over the items
    assert two.state.frames_used == 90  # the prefix's frames are in the test episode's steps and count
    # Code that failed its own tests still runs in the whole task's chain (handing over when its conditions hold,
    # else after its frames), so the later link is tested behind it as the chain will run it.
    two.state.subtasks["table"].status = Status.FAILED
    two.attempts.code(plan.subtasks[2], two.state.subtasks["pickaxe"], [common_pb2.ItemCount(item="wood", count=3)],
                      plan)
    assert [list(step.success) for step in fast.asked[-1]["prefix"]] == [[WOOD], [TABLE]]
    assert fast.asked[-1]["after"] == ["wood", "table"] and fast.asked[-1]["start_inventory"] == []
    two.state.subtasks["table"].skill_code = ""  # no code: nothing the chain could run there
    two.attempts.code(plan.subtasks[2], two.state.subtasks["pickaxe"], [common_pb2.ItemCount(item="wood", count=3)],
                      plan)
    assert fast.asked[-1]["prefix"] == [] and fast.asked[-1]["after"] == []
    assert fast.asked[-1]["start_inventory"] == [common_pb2.ItemCount(item="wood", count=3)]


def test_a_renamed_link_starts_from_the_code_and_verdict_of_the_link_it_replaces(tmp_path: Path) -> None:
    """The slow agent renames a link to have it written again (e.g. to stay alive while it works): its first attempt
    is shown the replaced link's code, which the chain ran, not nothing."""
    two = plan_loops(tmp_path)
    table = two.state.subtasks["table"]
    table.feedback, table.success_rate = "died to a zombie in 2 of 4 episodes", 0.5
    renamed = planner_pb2.Plan()
    renamed.CopyFrom(PLAN)
    renamed.subtasks[1].name, renamed.subtasks[1].description = "table_safely", "place a table, fighting zombies"
    two._adopt_plan(renamed)
    assert two.state.subtasks["table_safely"].replaces == "table"
    assert two.state.subtasks["pickaxe"].replaces == ""  # kept under its name: its own work, nothing replaced
    fast = two.attempts.fast = RecordingFast()
    two.attempts.code(renamed.subtasks[1], two.state.subtasks["table_safely"], [], renamed)
    asked = fast.asked[-1]
    assert asked["previous_code"] == table.skill_code
    assert asked["feedback"].startswith("This sub-task replaces table in the plan (the same success conditions")
    assert "(its last test success 50%)" in asked["feedback"] and asked["feedback"].endswith(
        "Its last critic feedback: died to a zombie in 2 of 4 episodes")
    # Its second attempt revises its own code, as any sub-task's does.
    two.attempts.code(renamed.subtasks[1], two.state.subtasks["table_safely"], [], renamed)
    assert fast.asked[-1]["previous_code"] == "def skill(agent):\n    yield 'noop'\n"


def test_a_new_link_with_other_conditions_replaces_nothing(tmp_path: Path) -> None:
    two = plan_loops(tmp_path)
    other = planner_pb2.Plan()
    other.CopyFrom(PLAN)
    other.subtasks[1].name = "sapling"
    other.subtasks[1].success[0].achievement = "collect_sapling"
    two._adopt_plan(other)
    assert two.state.subtasks["sapling"].replaces == ""


def test_the_skill_writer_and_its_critic_read_that_tests_start_behind_the_chain() -> None:
    protocol = EvalProtocol()
    behind = protocol.code_test([], after=["wood", "table"])
    assert "the coded skills of the sub-tasks before this one (wood, table) run first" in behind
    assert "at that time of day" in behind and "starts holding" not in behind
    assert protocol.judge_text("code", [], None, ["wood", "table"]) == behind
    assert "The player starts holding: 3 wood" in protocol.code_test([common_pb2.ItemCount(item="wood", count=3)])


class RefusingFast(RecordingFast):
    """Test double of the fast agent whose answer the env server refused at registration (nothing tested)."""

    def write_skill(self, subtask: planner_pb2.SubTask, **kwargs: Any) -> list[SkillCandidate]:
        self.asked.append(kwargs)
        answer = SkillAnswer(name=subtask.name, description="crashes", code="def skill(agent):\n    yield x\n")
        refused = common_pb2.SkillError(type="NameError", message="name 'x' is not defined", line=2)
        return [SkillCandidate(0, answer, -1.0, error=refused)]


def test_a_revision_refused_untested_does_not_replace_the_code_the_chain_runs(tmp_path: Path) -> None:
    """Run 6's chain could not be evaluated: a revision the env server refused had replaced working code. The chain
    keeps the tested code; the next revision is shown the refused code with its error."""
    two = plan_loops(tmp_path)
    table, working = two.state.subtasks["table"], two.state.subtasks["table"].skill_code
    fast = two.attempts.fast = RefusingFast()
    two.attempts.code(PLAN.subtasks[1], table, [], PLAN)
    assert table.skill_code == working and table.refused_code == "def skill(agent):\n    yield x\n"
    assert "NameError" in table.last_error
    two.attempts.code(PLAN.subtasks[1], table, [], PLAN)
    assert fast.asked[-1]["previous_code"] == table.refused_code and "NameError" in fast.asked[-1]["error"]
    two.attempts.fast = RecordingFast()  # a revision that was tested replaces the code, and nothing is refused
    two.attempts.code(PLAN.subtasks[1], table, [], PLAN)
    assert table.skill_code == "def skill(agent):\n    yield 'noop'\n" and table.refused_code == ""


def test_a_first_attempt_refused_untested_leaves_the_link_without_code(tmp_path: Path) -> None:
    two = plan_loops(tmp_path)
    two.attempts.fast = RefusingFast()
    pickaxe = two.state.subtasks["pickaxe"]
    two.attempts.code(PLAN.subtasks[2], pickaxe, [], PLAN)
    assert pickaxe.skill_code == "" and pickaxe.refused_code  # the chain has no code to run there, not broken code
