"""What the planner passes to the critic from an attempt's episodes, an RL attempt's training and verdict steps,
and its macro actions (written by the fast agent, registered on the real env server, joined to the config's
skills, refused with their line)."""

from __future__ import annotations

import json
from pathlib import Path

from fakes.fake_learner import FakeLearner
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.llm import LLMClient
from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.agents.fast import FastAgent
from services.planner.attempts import Attempts
from services.planner.context import RunContext, Stubs
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import LibrarySkill, SkillLibrary
from services.planner.state import RunState, Status

TURN = "def skill(agent):\n    for direction in ('left', 'up'):\n        yield agent.face(direction)\n"
CRASH = "def skill(agent):\n    yield 'noop'\n    return 1 / 0\n"
RL_ANSWER = {"primitive_actions": ["noop", "do"], "skills": ["chop"], "skill_max_steps": 8,
             "macro_actions": [{"name": "turn", "description": "turn left then up", "code": TURN},
                               {"name": "broken", "description": "noop then crash", "code": CRASH}],
             "reward_terms": [{"kind": "success", "target": "", "weight": 5}], "episode_length": 300}


def test_an_rl_attempts_macro_actions_join_its_skills_and_a_refused_one_comes_back_with_its_line(
        tmp_path: Path, env_server) -> None:
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    library = SkillLibrary(tmp_path / "lib.json")
    for name in ("chop", "get_wood"):
        library.add(LibrarySkill(name, "chop trees", COLLECT_WOOD, 1.0, name))
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=COLLECT_WOOD, replace=True))
    goal = common_pb2.Condition(achievement="eat_cow")
    plan = planner_pb2.Plan(subtasks=[
        planner_pb2.SubTask(name="get_wood", decision=planner_pb2.DECISION_CODE,
                            success=[common_pb2.Condition(achievement="collect_wood")]),
        planner_pb2.SubTask(name="eat_cow", decision=planner_pb2.DECISION_RL, skills=["chop"], success=[goal])])
    state = RunState()
    state.set_plan(plan)
    state.subtasks["get_wood"].status = Status.DONE
    learner = FakeLearner()
    run = Run(tmp_path / "run", planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="eat_cow", success=[goal]),
                                                            agents="slow-fast"))
    ctx = RunContext.create(run, state, describe, Stubs(env=env_server.stub, learner=learner, critic=None), library,
                            PlannerSettings(eval_episodes=8))
    sub = state.subtasks["eat_cow"]
    # A test double of the hosted LLM: the first answer writes two macro actions, the revision none.
    with FakeOpenAIServer([Reply.json(RL_ANSWER), Reply.json({**RL_ANSWER, "macro_actions": []})]) as server:
        llm = LLMClient(LLMSettings(max_retries=1, backoff_seconds=0.01, timeout_seconds=5, model="scripted"),
                        base_url=server.base_url, record_dir=tmp_path / "llm")
        attempts = Attempts(ctx, FastAgent(llm, env_server.stub, describe, library, seed=1, protocol=ctx.protocol))
        verdict = attempts.rl(plan.subtasks[1], sub, [], plan)
        # Library skill, earlier coded sub-task, then the accepted macro action; the crashing one is left out.
        assert list(learner.configs[0].skills) == ["chop", "get_wood", "eat_cow__turn"]
        assert sub.macro_actions == {"eat_cow__turn": TURN}
        assert "Macro action broken was refused" in verdict.diagnosis and "line 3" in verdict.diagnosis
        assert "ZeroDivisionError" in verdict.diagnosis and "success rate 50%" in verdict.diagnosis
        codes = [e.code for e in run.events if e.HasField("code")]
        assert [(c.skill, c.code, c.success_rate, c.error.line) for c in codes] == \
            [("eat_cow__turn", TURN, 0.0, 0), ("eat_cow__broken", CRASH, -1.0, 3)]
        record = json.loads((run.dir / "attempts" / "iter0_eat_cow_rl0.json").read_text())
        assert record["macro_actions"] == [{"name": "eat_cow__turn", "code": TURN}]
        assert record["refused_macro_actions"][0]["name"] == "eat_cow__broken"
        assert "line 3" in record["refused_macro_actions"][0]["error"]
        assert RunState.load(ctx.run.dir).subtasks["eat_cow"].macro_actions == {"eat_cow__turn": TURN}

        # The revision (the loop keeps the verdict as feedback) sees what it revises.
        sub.feedback = f"{verdict.diagnosis} {verdict.suggestion}".strip()
        sub.inner_iterations += 1
        attempts.rl(plan.subtasks[1], sub, [], plan)
    revision = server.requests[1]["messages"][0]["content"]
    previous = json.loads(revision.split("its macro actions' code included):\n", 1)[1].split("\n", 1)[0])
    assert previous["macro_actions"] == [{"name": "turn", "code": TURN}]
    assert previous["skills"] == ["chop", "get_wood"] and previous["env_frames"] == learner.configs[0].env_frames
    curve = revision.split("Learning curve of that training", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert curve[0] == "- 50 frames: success 5%, mean return 0.10"  # frames of that training, not of the sub-task
    assert curve[-1] == "- 500 frames: success 50%, mean return 1.00" and len(curve) == 6
    assert "Macro action broken was refused" in revision and "return 1 / 0" in revision  # the verdict
    assert len(revision) < 20000
    # The revision wrote no macro action: the state keeps none, and its config has none of the old ones.
    assert sub.macro_actions == {} and list(learner.configs[1].skills) == ["chop", "get_wood"]
