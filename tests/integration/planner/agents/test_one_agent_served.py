"""The one agent (``--agents one``): its answer schema, one call through the real LLM client to a scripted
OpenAI-compatible test double, its answers handled as the fast agent's are (tested on the real env server), and its
prompt rendered from a real env server's Describe."""

from __future__ import annotations

import json
import re

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply
from one_agent_support import CODE_ANSWER as ANSWER
from one_agent_support import FIND_COW, GET_WOOD, PROTOCOL, SETTINGS, solved

from rlgpt.llm import LLMClient, StructuredOutputError
from rlgpt.llm.client import record_json
from rlgpt.reward_kinds import offered
from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.agents.fast import FastAgent
from services.planner.agents.one import OneAgent
from services.planner.agents.one_answers import AGENT, AnsweredPlan, WrittenAnswers, recorded_answer
from services.planner.plans import summary
from services.planner.skill_library import LibrarySkill
from services.planner.state import RunState, Status

TASK = common_pb2.TaskSpec(name="eat_cow", success=[common_pb2.Condition(achievement="eat_cow")])
_FIELD = re.compile(r"\{[a-z_]+\}")


def one_agent(llm, env_server, describe, library, **kw) -> OneAgent:
    return OneAgent(llm, env_server.stub, describe, library, seed=1, protocol=PROTOCOL, **kw)


def client(server: FakeOpenAIServer, tmp_path) -> LLMClient:
    return LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm")


# --- the schema -----------------------------------------------------------------------------------------


# --- one call -------------------------------------------------------------------------------------------
def test_solve_plans_codes_and_configures_in_one_recorded_call(env_server, describe, library, tmp_path) -> None:
    agent, plan, record, server = solved(lambda llm: one_agent(llm, env_server, describe, library), ANSWER, TASK,
                                    tmp_path, iteration=2)
    assert len(server.requests) == 1 and record.agent == AGENT and record.iteration == 2
    assert [st.name for st in plan.subtasks] == ["get_wood", "find_cow"] and plan.iteration == 2
    assert [st.decision for st in plan.subtasks] == [planner_pb2.DECISION_CODE, planner_pb2.DECISION_RL]
    assert agent.answered.code == {"get_wood": COLLECT_WOOD} and agent.answered.rl["find_cow"]["episode_length"] == 300
    prompt = server.requests[0]["messages"][0]["content"]
    assert describe.rules.text.strip() in prompt and describe.skill_api.strip()[:300] in prompt
    assert "eat_cow" in prompt and "tested on 2 episodes" in prompt and "trains for 20000 frames" in prompt
    schema = json.dumps(server.requests[0]["response_format"]["json_schema"]["schema"])
    assert '"code"' in schema and '"rl"' in schema and "primitive_actions" in schema


@pytest.mark.parametrize(("bad", "needle"), [
    ({**ANSWER, "subtasks": [{**GET_WOOD, "code": None}, FIND_COW]}, "'get_wood' has decision"),
    ({**ANSWER, "subtasks": [FIND_COW, GET_WOOD]}, "'get_wood') must have the task's own success conditions"),
])


def test_a_bad_answer_is_repaired_with_a_message_naming_the_subtask(env_server, describe, library, tmp_path, bad,
                                                                     needle) -> None:
    with FakeOpenAIServer([Reply.json(bad), Reply.json(ANSWER)]) as server:
        plan, record = one_agent(client(server, tmp_path), env_server, describe, library).solve(TASK)
    assert record.attempts == 2 and len(plan.subtasks) == 2
    assert needle in server.requests[1]["messages"][-1]["content"]
    with FakeOpenAIServer([Reply.json(bad)]) as server, pytest.raises(StructuredOutputError) as info:
        one_agent(client(server, tmp_path), env_server, describe, library).solve(TASK)
    assert info.value.record is not None and info.value.record.agent == AGENT


# --- the answers, served --------------------------------------------------------------------------------


def test_fast_serves_the_prewritten_code_through_the_env_server(env_server, describe, library, tmp_path) -> None:
    agent, plan, _, server = solved(lambda llm: one_agent(llm, env_server, describe, library), ANSWER, TASK,
                                    tmp_path)
    fast = agent.fast()
    assert isinstance(fast, WrittenAnswers)  # the answer handling, called directly: no LLM
    [candidate] = fast.write_skill(plan.subtasks[0], candidates=3, start_inventory=[])
    assert candidate.record is None and candidate.answer.code == COLLECT_WOOD  # recorded once, by solve
    assert candidate.success_rate > 0 and candidate.error is None and len(candidate.episodes) == 2
    assert "get_wood" in [s.name for s in env_server.stub.ListSkills(env_pb2.ListSkillsRequest()).skills]
    assert library.all()[0].name == "get_wood"
    # Tried already: the same code on the same worlds would only spend frames again.
    [again] = fast.write_skill(plan.subtasks[0])
    assert again.answer is None and again.record is None and "tried already" in again.error.message
    # A sub-task the loops appended has no pre-written answer: an unusable-answer failure.
    goal = planner_pb2.SubTask(name="eat_cow", success=list(TASK.success), decision=planner_pb2.DECISION_CODE)
    [missing] = fast.write_skill(goal)
    assert missing.answer is None and missing.error.type == "StructuredOutputError" and missing.episodes == []
    assert len(server.requests) == 1  # nothing more was asked of the LLM


def test_bad_prewritten_code_comes_back_as_the_skills_error(env_server, describe, library, tmp_path) -> None:
    broken = {**GET_WOOD, "code": "def skill(agent):\n    yield 'do'\n    return 1 / 0\n"}
    with FakeOpenAIServer([Reply.json({**ANSWER, "subtasks": [broken, FIND_COW]})]) as server:
        agent = one_agent(client(server, tmp_path), env_server, describe, library)
        plan, _ = agent.solve(TASK)
    [candidate] = agent.fast().write_skill(plan.subtasks[0])
    assert candidate.success_rate <= 0 and candidate.error is not None and "ZeroDivisionError" in str(candidate.error)
    assert library.all() == []


def test_fast_serves_the_prewritten_rl_config(env_server, describe, library, tmp_path) -> None:
    agent, plan, _, server = solved(lambda llm: one_agent(llm, env_server, describe, library), ANSWER, TASK,
                                    tmp_path)
    start = [common_pb2.ItemCount(item="wood", count=1)]
    config, record = agent.fast().write_rl_config(plan.subtasks[1], env_frames=5000, start_inventory=start)
    assert record is None and config.env_frames == 5000 and config.episode_length == 300
    assert config.task.success[0].achievement == "eat_cow" and list(config.task.start_inventory) == start
    # complete_action_space, as FastAgent does: the moves joined "noop" and "do".
    assert {"noop", "do", "move_left", "move_up"} <= set(config.primitive_actions)
    with pytest.raises(StructuredOutputError, match="tried already") as info:
        agent.fast().write_rl_config(plan.subtasks[1], env_frames=5000)
    assert info.value.record is None
    with pytest.raises(StructuredOutputError, match="no rl for sub-task 'get_wood'"):
        agent.fast().write_rl_config(plan.subtasks[0], env_frames=5000)
    agent.restore(ANSWER)  # a new answer (as after a new solve): served again
    if hasattr(FastAgent, "write_rl"):  # what Attempts.rl calls where FastAgent has it
        answer = agent.fast().write_rl(plan.subtasks[1], env_frames=5000)
        assert answer.record is None and answer.config.episode_length == 300
    else:
        assert agent.fast().write_rl_config(plan.subtasks[1], env_frames=5000)[1] is None
    assert len(server.requests) == 1


# --- revisions and resume -------------------------------------------------------------------------------


def test_revision_prompt_shows_the_previous_answers_and_how_they_did(env_server, describe, library, tmp_path) -> None:
    agent, plan, _, _server = solved(lambda llm: one_agent(llm, env_server, describe, library), ANSWER, TASK,
                                    tmp_path)
    state = RunState()
    state.set_plan(plan)
    state.subtasks["get_wood"].status, state.subtasks["get_wood"].success_rate = Status.DONE, 1.0
    state.subtasks["get_wood"].skill_code = COLLECT_WOOD
    state.subtasks["find_cow"].status = Status.FAILED
    state.subtasks["find_cow"].feedback = "success rate 0%; error TimeoutError: the cow ran away"
    state.subtasks["find_cow"].rl_config = {"name": "find_cow", "primitive_actions": ["noop", "do", "move_left"],
                                            "skill_max_steps": 1, "episode_length": 300, "env_frames": 5000,
                                            "reward_terms": [{"kind": "success", "weight": 5.0}]}
    feedback = summary(plan, state)
    for previous in (AnsweredPlan.from_state(plan, state), plan):  # from the run's state, or its own memory
        prompt, _ = agent.prompt(TASK, previous=previous, feedback=feedback)
        shown = prompt.split("Previous answer (", 1)[1].split("\n", 2)[1]
        doc = json.loads(shown)
        assert [st["name"] for st in doc["subtasks"]] == ["get_wood", "find_cow"]
        assert doc["subtasks"][1]["rl"]["episode_length"] == 300 and doc["subtasks"][1]["decision"] == "rl"
        assert '"code" of get_wood:\n    def skill(agent):' in prompt
        assert "- find_cow (rl): failed, success 0%; success rate 0%; error TimeoutError: the cow ran away" in prompt
    fresh, _ = agent.prompt(TASK)
    assert "the code of its coded sub-tasks follows it):\n(none)" in fresh


def test_restore_serves_a_recorded_answer_again(env_server, describe, library, tmp_path) -> None:
    with FakeOpenAIServer([Reply.json(ANSWER)]) as server:
        _, record = one_agent(client(server, tmp_path), env_server, describe, library).solve(TASK)
    run_dir = tmp_path / "run"
    (run_dir / "llm").mkdir(parents=True)
    (run_dir / "llm" / f"00003-iter0-plan-{AGENT}.json").write_text(record_json(record))
    fresh = one_agent(None, env_server, describe, library)  # a resumed planner: no LLM call needed
    plan = fresh.restore(recorded_answer(run_dir), iteration=0)
    assert [st.name for st in plan.subtasks] == ["get_wood", "find_cow"] and fresh.answered.code["get_wood"]
    config, _ = fresh.fast().write_rl_config(plan.subtasks[1], env_frames=5000)
    assert config.episode_length == 300
    assert recorded_answer(tmp_path / "nothing") is None


# --- the prompt, as a model reads it ---------------------------------------------------------------------


def test_prompt_from_the_real_describe(env_server, describe, library) -> None:
    library.add(LibrarySkill("get_wood", "Collect wood from the nearest trees until holding 3.", COLLECT_WOOD, 0.75,
                             "get_wood"))
    task = common_pb2.TaskSpec(name="make_wood_pickaxe",
                               success=[common_pb2.Condition(achievement="make_wood_pickaxe")])
    prompt, schema = one_agent(None, env_server, describe, library).prompt(task)
    assert not _FIELD.findall(prompt), _FIELD.findall(prompt)
    assert "DECISION_" not in prompt and describe.rules.text.strip() in prompt
    assert prompt.count(describe.rules.text.strip()) == 1  # the rules once (they end the skill API)
    assert all(f"- {kind}" in prompt for kind in offered(describe.reward_kinds))
    assert "fast agent" not in prompt and "slow agent" not in prompt  # one agent: it revises its own answers
    assert "holding: nothing" not in prompt and "holding: what the sub-tasks before it leave" in prompt
    assert 'its "success" must include exactly the task\'s conditions: [{"achievement": "make_wood_pickaxe"}]' in prompt
    library_names = {m.group(1) for m in re.finditer(r"^- ([a-z0-9_]+):", prompt.split("Skill library", 1)[1]
                                                     .split("\n\n", 1)[0], re.MULTILINE)}
    rl = schema.model_json_schema()["$defs"]["RLConfig"]["properties"]["skills"]["items"]
    assert library_names == {"get_wood"} == set(rl.get("enum", [rl.get("const")]))
    assert "code:\n    def skill(agent):" in prompt  # the relevant library skill's code, to copy
    code_only, _ = one_agent(None, env_server, describe, library, allow_rl=False).prompt(task)
    assert '"code" only: this run trains no policies' in code_only


