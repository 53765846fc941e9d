"""Slow and fast agents with scripted LLM answers (OpenAI-compatible test double) and the real env server."""

from __future__ import annotations

import json

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.llm import LLMClient, StructuredOutputError
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.action_space import actions_for, complete_action_space
from services.planner.agents.fast import FastAgent
from services.planner.agents.slow import SlowAgent
from services.planner.prompts import PROMPT_DIR, render
from services.planner.skill_library import LibrarySkill, SkillLibrary

SETTINGS = LLMSettings(max_retries=1, backoff_seconds=0.01, timeout_seconds=5, model="scripted")
PLAN = {"rationale": "wood first", "subtasks": [
    {"name": "get_wood", "description": "collect two wood", "success": [{"item": "wood", "count": 2}],
     "decision": "code", "skills": []},
    {"name": "find_cow", "description": "eat a cow", "success": [{"achievement": "eat_cow"}], "decision": "rl",
     "skills": []}]}
GOOD_SKILL = {"name": "get_wood", "description": "chop trees", "code": COLLECT_WOOD}
WOOD_SUBTASK = planner_pb2.SubTask(name="get_wood", description="collect wood", decision=planner_pb2.DECISION_CODE,
                                   success=[common_pb2.Condition(achievement="collect_wood")])


@pytest.fixture
def describe(env_server) -> env_pb2.DescribeResponse:
    return env_server.stub.Describe(env_pb2.DescribeRequest())


def llm(server: FakeOpenAIServer, tmp_path) -> LLMClient:
    return LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm")


def test_slow_agent_plan(describe, library, tmp_path) -> None:
    with FakeOpenAIServer([Reply.json(PLAN)]) as server:
        plan, record = SlowAgent(llm(server, tmp_path), describe, library).plan(common_pb2.TaskSpec(name="eat_cow"))
    assert [s.name for s in plan.subtasks] == ["get_wood", "find_cow"]
    assert plan.subtasks[0].success[0].inventory.count == 2 and plan.subtasks[1].decision == planner_pb2.DECISION_RL
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert "collect_diamond" in json.dumps(schema)  # vocabulary enums are in the schema
    assert "eat_cow" in server.requests[0]["messages"][0]["content"]
    assert record.prompt_tokens > 0


@pytest.mark.parametrize("bad", [
    {"rationale": "nothing to do", "subtasks": []},
    {"rationale": "too much", "subtasks": [PLAN["subtasks"][0]] * 1000},
    {"rationale": "x", "subtasks": [{**PLAN["subtasks"][0], "success": [{"achievement": "fly_to_moon"}]}]},
    {"rationale": "x", "subtasks": [{**PLAN["subtasks"][0], "success": [{"achievement": "collect_wood",
                                                                         "item": "wood"}]}]},
])
def test_bad_plans_are_repaired_once_then_fail_clearly(describe, library, tmp_path, bad) -> None:
    with FakeOpenAIServer([Reply.json(bad), Reply.json(PLAN)]) as server:
        plan, record = SlowAgent(llm(server, tmp_path), describe, library).plan(common_pb2.TaskSpec(name="eat_cow"))
    assert record.attempts == 2 and len(plan.subtasks) == 2
    assert "invalid" in server.requests[1]["messages"][-1]["content"]
    with FakeOpenAIServer([Reply.json(bad)]) as server, pytest.raises(StructuredOutputError):
        SlowAgent(llm(server, tmp_path), describe, library).plan(common_pb2.TaskSpec(name="eat_cow"))


def fast_agent(server, describe, library, env_server, tmp_path) -> FastAgent:
    return FastAgent(llm(server, tmp_path), env_server.stub, describe, library, test_episodes=2, test_steps=150,
                     seed=1)


def test_fast_agent_skill_is_tested_registered_and_stored(describe, library, env_server, tmp_path) -> None:
    with FakeOpenAIServer([Reply.json(GOOD_SKILL)]) as server:
        [best] = fast_agent(server, describe, library, env_server, tmp_path).write_skill(WOOD_SUBTASK)
    assert best.success_rate > 0 and best.error is None
    assert "get_wood" in [s.name for s in env_server.stub.ListSkills(env_pb2.ListSkillsRequest()).skills]
    assert library.all()[0].name == "get_wood" and library.all()[0].success_rate == best.success_rate


@pytest.mark.parametrize(("code", "needle"), [
    ("def skill(agent)\n    yield 'do'\n", "SyntaxError"),
    ("def skill(agent):\n    x = ().__class__.__bases__[0].__subclasses__()\n    yield 'do'\n", "__class__"),
    ("import os\ndef skill(agent):\n    os.system('id')\n    yield 'do'\n", "import"),
])
def test_bad_code_comes_back_as_an_error_for_the_agent(describe, library, env_server, tmp_path, code, needle) -> None:
    with FakeOpenAIServer([Reply.json({**GOOD_SKILL, "code": code})]) as server:
        [candidate] = fast_agent(server, describe, library, env_server, tmp_path).write_skill(WOOD_SUBTASK)
    assert candidate.success_rate == -1 and candidate.error.type == "INVALID_ARGUMENT"
    assert needle in candidate.error.message
    assert library.all() == []


def test_candidates_keep_the_best(describe, library, env_server, tmp_path) -> None:
    idle = {**GOOD_SKILL, "code": "def skill(agent):\n    for i in range(20):\n        yield 'noop'\n"}
    broken = {**GOOD_SKILL, "code": "def skill(agent):\n    yield 'do'\n    return 1 / 0\n"}
    with FakeOpenAIServer([Reply.json(idle), Reply.json(broken), Reply.json(GOOD_SKILL)]) as server:
        results = fast_agent(server, describe, library, env_server, tmp_path).write_skill(WOOD_SUBTASK, candidates=3)
    assert results[0].index == 2 and results[0].success_rate > 0
    assert min(c.success_rate for c in results) <= 0
    # The crash comes back with its line: from the test episodes, or from the env server refusing it at registration.
    assert any(c.error is not None and ((c.error.type == "ZeroDivisionError" and c.error.line == 3)
                                        or ("ZeroDivisionError at line 3" in c.error.message)) for c in results)


def test_fast_agent_rl_config(describe, library, env_server, tmp_path) -> None:
    library.add(LibrarySkill("get_wood", "chop", COLLECT_WOOD, 1.0, "get_wood"))
    answer = {"primitive_actions": ["noop", "do", "move_left"], "skills": ["get_wood"], "skill_max_steps": 16,
              "reward_terms": [{"kind": "success", "target": "", "weight": 5}], "episode_length": 300}
    subtask = planner_pb2.SubTask(name="eat_cow", success=[common_pb2.Condition(achievement="eat_cow")])
    with FakeOpenAIServer([Reply.json({**answer, "primitive_actions": ["teleport"]}), Reply.json(answer)]) as server:
        config, record = fast_agent(server, describe, library, env_server, tmp_path).write_rl_config(
            subtask, env_frames=5000)
    assert record.attempts == 2  # the unknown action was repaired
    assert list(config.skills) == ["get_wood"] and config.env_frames == 5000 and config.task.success[0].achievement


def registered_skills(stub) -> set[str]:
    names, token = set(), ""
    while True:
        page = stub.ListSkills(env_pb2.ListSkillsRequest(page_size=200, page_token=token))
        names |= {s.name for s in page.skills}
        if not (token := page.next_page_token):
            return names


TURN = "def skill(agent):\n    for direction in ('left', 'up'):\n        yield agent.face(direction)\n"
CRASH = "def skill(agent):\n    yield 'noop'\n    return 1 / 0\n"


def test_macro_actions_are_registered_for_their_sub_task_and_a_crashing_one_is_refused_with_its_line(
        describe, library, env_server, tmp_path) -> None:
    answer = {"primitive_actions": ["noop", "do"], "skills": [], "skill_max_steps": 8,
              "macro_actions": [{"name": "turn", "description": "turn left then up", "code": TURN},
                                {"name": "broken", "description": "noop then crash", "code": CRASH}],
              "reward_terms": [{"kind": "success", "target": "", "weight": 5}], "episode_length": 300,
              "env_frames": 3000}
    subtask = planner_pb2.SubTask(name="eat_cow", success=[common_pb2.Condition(achievement="eat_cow")])
    with FakeOpenAIServer([Reply.json(answer)]) as server:
        fast = fast_agent(server, describe, library, env_server, tmp_path)
        written = fast.write_rl(subtask, env_frames=5000)
    assert written.config.env_frames == 3000  # asked for fewer than offered
    assert [m.name for m in written.macro_actions] == ["turn", "broken"]
    assert not any(name.startswith("eat_cow__") for name in written.config.skills)  # not registered yet
    macros = fast.register_macro_actions(subtask, written.macro_actions)
    assert macros.accepted == {"eat_cow__turn": TURN}
    [(name, macro, error)] = macros.refused
    assert (name, macro.name, error.type, error.line, error.code_line) == \
        ("eat_cow__broken", "broken", "INVALID_ARGUMENT", 3, "return 1 / 0")
    assert "ZeroDivisionError" in macros.feedback() and "line 3" in macros.feedback() and "broken" in \
        macros.feedback()
    registered = registered_skills(env_server.stub)
    assert "eat_cow__turn" in registered and "eat_cow__broken" not in registered
    # The config without them, for callers that do not register macro actions.
    with FakeOpenAIServer([Reply.json(answer)]) as server:
        config, record = fast_agent(server, describe, library, env_server, tmp_path).write_rl_config(
            subtask, env_frames=5000)
    assert config == written.config and record.attempts == 1


def test_rl_action_space_gets_what_its_success_condition_needs(describe, library, env_server, tmp_path) -> None:
    answer = {"primitive_actions": ["do", "noop"], "skills": [], "skill_max_steps": 1,
              "reward_terms": [{"kind": "success", "target": "", "weight": 5}], "episode_length": 300}
    subtask = planner_pb2.SubTask(name="pickaxe", success=[common_pb2.Condition(achievement="make_wood_pickaxe")])
    with FakeOpenAIServer([Reply.json(answer)]) as server:
        config, _ = fast_agent(server, describe, library, env_server, tmp_path).write_rl_config(
            subtask, env_frames=5000)
    assert list(config.primitive_actions) == ["do", "noop", "move_left", "move_right", "move_up", "move_down",
                                              "make_wood_pickaxe"]
    wood = learner_pb2.RLConfig(primitive_actions=["move_left"], task=common_pb2.TaskSpec(success=[
        common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=2)),
        common_pb2.Condition(inventory=common_pb2.ItemCount(item="table", count=1))]))
    actions, rules = list(describe.actions), describe.rules
    assert complete_action_space(wood, actions, rules) == ["move_right", "move_up", "move_down", "do", "place_table"]
    everything = learner_pb2.RLConfig(task=wood.task)  # empty: all actions already
    assert complete_action_space(everything, actions, rules) == [] and not everything.primitive_actions


@pytest.mark.parametrize(("condition", "needed"), [
    (common_pb2.Condition(achievement="place_furnace"), ["place_furnace"]),  # a place rule
    (common_pb2.Condition(achievement="collect_drink"), ["do"]),  # a collect rule
    (common_pb2.Condition(inventory=common_pb2.ItemCount(item="stone_pickaxe", count=1)), ["make_stone_pickaxe"]),
    # No rule unlocks these: the actions the rules' facts quote beside them, else the collecting action.
    (common_pb2.Condition(achievement="wake_up"), ["sleep"]),
    (common_pb2.Condition(achievement="eat_cow"), ["do"]),
    (common_pb2.Condition(achievement="defeat_zombie"), ["do"]),
])
def test_the_actions_a_condition_needs_come_from_the_rules(describe, condition, needed) -> None:
    assert actions_for(condition, describe.rules, list(describe.actions)) == needed
    assert actions_for(condition, common_pb2.WorldRules(), list(describe.actions)) == \
        ([condition.achievement] if condition.achievement in describe.actions else [])  # no rules: no guess


def test_library_retrieval_and_prompts_name_their_example_tasks(tmp_path) -> None:
    library = SkillLibrary(tmp_path / "lib.json")
    library.add(LibrarySkill("collect_wood", "chop trees for wood", "x", 0.9, "collect_wood"))
    library.add(LibrarySkill("drink_water", "walk to water and drink", "x", 1.0, "collect_drink"))
    assert library.retrieve("get some wood from trees")[0].name == "collect_wood"
    assert not library.add(LibrarySkill("collect_wood", "worse", "y", 0.5, "collect_wood"))
    assert SkillLibrary(tmp_path / "lib.json").all()[0].description == "chop trees for wood"  # persisted
    for path in PROMPT_DIR.glob("*.txt"):
        assert "covers" in path.read_text().splitlines()[0], path
    with pytest.raises(KeyError, match="needs fields"):
        render("slow_agent", task="x")


def test_out_of_range_numbers_are_clamped_not_fatal(describe, library, env_server, tmp_path) -> None:
    answer = {"primitive_actions": ["do"], "skills": [], "skill_max_steps": 0,
              "reward_terms": [{"kind": "success", "target": "", "weight": 99}], "episode_length": 1}
    subtask = planner_pb2.SubTask(name="eat_cow", success=[common_pb2.Condition(achievement="eat_cow")])
    with FakeOpenAIServer([Reply.json(answer)]) as server:
        config, record = fast_agent(server, describe, library, env_server, tmp_path).write_rl_config(
            subtask, env_frames=1000)
    assert record.attempts == 1
    assert config.episode_length == 50 and config.skill_max_steps == 1 and config.reward_terms[0].weight == 10


def test_plan_names_are_coerced_to_snake_case_and_repeats_kept_apart() -> None:
    """A small model copies the form's "<snake_case name>" placeholder: corrected, and two copies stay two."""
    from rlgpt.v1 import env_pb2 as _env_pb2
    from services.planner.answer_forms import plan_to_proto
    from services.planner.schemas import plan_schema

    describe = _env_pb2.DescribeResponse(achievements=["collect_wood"], items=["wood"])
    schema = plan_schema(describe, ())
    step = {"name": "<snake_case name>", "description": "d", "success": [{"achievement": "collect_wood"}],
            "decision": "code", "skills": []}
    plan = plan_to_proto(schema.model_validate({"rationale": "r", "subtasks": [step, step]}), 0)
    assert [s.name for s in plan.subtasks] == ["snake_case_name", "snake_case_name_2"]
    assert plan.rationale == "r"
    copied = plan_to_proto(schema.model_validate({"rationale": " <why this chain and these decisions>",
                                                  "subtasks": [step]}), 0)
    assert copied.rationale == ""  # the form's placeholder says nothing: dropped, not shown in the report


def test_a_revision_shows_its_macro_actions_code_whole_within_a_bound() -> None:
    from services.planner.agents.texts import MAX_SHOWN_CODE_CHARS, MAX_SHOWN_MACRO_CHARS, curve_text, shown_macros

    small, big = "def skill(agent):\n    yield 'noop'\n", "x" * (MAX_SHOWN_CODE_CHARS + 1)
    fill = "y" * (MAX_SHOWN_MACRO_CHARS - len(small))  # too big on its own: it never counts against the rest
    shown = shown_macros({"a__small": small, "a__big": big, "a__fill": fill, "a__last": small})
    assert shown["a__small"] == small and shown["a__last"] == small
    assert shown["a__big"].startswith(f"(code of {len(big)} characters, too long") and shown["a__fill"] != fill
    assert sum(len(code) for code in shown.values()) < MAX_SHOWN_MACRO_CHARS
    assert curve_text([]) == "(none)"
    points = [{"env_frames": 9000 + i, "training_frames": i, "success_rate": 0.5, "mean_return": 1} for i in range(3)]
    assert curve_text(points).splitlines()[0] == "- 0 frames: success 50%, mean return 1.00"
    assert curve_text([{"env_frames": 7, "success_rate": 0, "mean_return": 0}]) == \
        "- 7 frames: success 0%, mean return 0.00"  # a state written before training_frames


def test_evenly_keeps_the_ends_and_spreads_the_rest() -> None:
    from services.planner.agents.texts import evenly

    assert evenly(list(range(11)), 6) == [0, 2, 4, 6, 8, 10]
    assert evenly(list(range(10)), 3) == [0, 4, 9]  # round(4.5) == 4: the middle as Python rounds it
    assert evenly([1, 2], 6) == [1, 2] and evenly([], 3) == []
    assert evenly([1, 2, 3], 1) == [3] and evenly([1, 2, 3], 0) == []
