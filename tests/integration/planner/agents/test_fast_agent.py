"""The fast agent with scripted LLM answers (an OpenAI-compatible test double) and the real env server: skills tested,
kept and registered, RL configs converted and completed, macro actions registered or refused with their line."""

from __future__ import annotations

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.llm import LLMClient
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.action_space import complete_action_space
from services.planner.agents.fast import FastAgent
from services.planner.skill_library import LibrarySkill

SETTINGS = LLMSettings(max_retries=1, backoff_seconds=0.01, timeout_seconds=5, model="scripted")
GOOD_SKILL = {"name": "get_wood", "description": "chop trees", "code": COLLECT_WOOD}
WOOD_SUBTASK = planner_pb2.SubTask(name="get_wood", description="collect wood", decision=planner_pb2.DECISION_CODE,
                                   success=[common_pb2.Condition(achievement="collect_wood")])


def llm(server: FakeOpenAIServer, tmp_path) -> LLMClient:
    return LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm")


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
    assert complete_action_space(wood, describe) == ["move_right", "move_up", "move_down", "do", "place_table"]
    everything = learner_pb2.RLConfig(task=wood.task)  # empty: all actions already
    assert complete_action_space(everything, describe) == [] and not everything.primitive_actions


def test_out_of_range_numbers_are_clamped_not_fatal(describe, library, env_server, tmp_path) -> None:
    answer = {"primitive_actions": ["do"], "skills": [], "skill_max_steps": 0,
              "reward_terms": [{"kind": "success", "target": "", "weight": 99}], "episode_length": 1}
    subtask = planner_pb2.SubTask(name="eat_cow", success=[common_pb2.Condition(achievement="eat_cow")])
    with FakeOpenAIServer([Reply.json(answer)]) as server:
        config, record = fast_agent(server, describe, library, env_server, tmp_path).write_rl_config(
            subtask, env_frames=1000)
    assert record.attempts == 1
    assert config.episode_length == 50 and config.skill_max_steps == 1 and config.reward_terms[0].weight == 10


