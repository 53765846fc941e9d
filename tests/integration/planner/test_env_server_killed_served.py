"""The env server SIGKILLed while the planner tests a skill (issue 38, item 6): the run pauses naming the env server
and its address and how to resume, and no agent is blamed: no verdict, no critic call, no rewrite asked of the fast
agent (the old planner judged the skill "The code raised UNAVAILABLE" and had a working skill rewritten). The env
server started again, the run resumed by id (as `rlgpt run --resume RUN --planner ADDR` does) goes on to its end
with nothing done before the kill lost (the first sub-task's attempt, its library skill, the plan: no agent is asked
for them again), and its report counts the whole run: every LLM call the run made, the killed test's included, and
every frame its events show. Real services on loopback, a scripted LLM (test double)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fault_support import RESUME, TWO_LINKS, RunFiles, assert_nothing_lost, assert_whole_run_counted, killable_services
from rlgpt_run_support import asked_subtask, options, schema_of

from rlgpt.app.runner import run_rlgpt
from rlgpt.errors import Unavailable

pytestmark = pytest.mark.timeout(600)


def test_a_dead_env_server_pauses_the_run_and_blames_no_agent(tmp_path) -> None:
    with killable_services(tmp_path, victim="env", delay=2.0, at=2, plan=TWO_LINKS) as services:
        env = services.processes["env"].target
        with pytest.raises(Unavailable) as info:
            run_rlgpt(options(tmp_path / "client", planner=services.planner, env_servers=1))
        assert services.script.killed.is_set()
        # first_wood was coded and passed; no agent was asked anything after get_wood's skill: no verdict, no rewrite.
        assert services.script.asked == ["Plan", "SkillAnswer", "SkillAnswer"]
        message = str(info.value)
        assert f"the run stopped: the env server at {env} is unavailable (" in message
        assert "the run is paused: resume it with --resume once the env server is back" in message
        resume = re.search(rf"{RESUME.pattern}$", message)
        assert resume and resume.group(2) == services.planner, message
        run_dir = services.runs / resume.group(1)
        paused = RunFiles.read(run_dir)
        assert not [e for e in paused.of("verdict") if e.subtask == "get_wood"], \
            "a verdict was given on a skill whose env server died"
        assert paused.events[-1].error.resumable and f"the env server at {env}" in paused.events[-1].error.message
        assert "UNAVAILABLE" not in str(paused.state["subtasks"])
        assert paused.state["subtasks"]["first_wood"]["status"] == "done" and "first_wood" in paused.library

        services.restart("env")
        report = run_rlgpt(options(tmp_path / "client", planner=resume.group(2), resume=Path(resume.group(1))))
        done = RunFiles.read(run_dir)
        asked = [(schema_of(body), asked_subtask(body)) for body in services.llm.requests]
    assert asked.count(("Plan", "")) == 1, "the plan was asked for again"
    assert asked.count(("SkillAnswer", "first_wood")) == 1, "first_wood, done before the kill, was coded again"
    assert asked.count(("SkillAnswer", "get_wood")) == 2  # the killed test's skill, then its resumed attempt
    assert_nothing_lost(paused, done)
    assert_whole_run_counted(done, llm_calls=len(asked))
    assert done.state["subtasks"]["get_wood"]["status"] == "done"
    assert report.read_text() == done.report
