"""The env server SIGKILLed while the planner tests a skill (issue 38, item 6): the run pauses naming the env server
and its address, and no agent is blamed: no verdict, no critic call, no rewrite asked of the fast agent (the old
planner judged the skill "The code raised UNAVAILABLE" and had a working skill rewritten). Real services on
loopback, a scripted LLM (test double)."""

from __future__ import annotations

import json
import re

import pytest
from fault_support import killable_services
from rlgpt_run_support import options

from rlgpt.app.runner import run_rlgpt
from rlgpt.errors import Unavailable

pytestmark = pytest.mark.timeout(600)


def test_a_dead_env_server_pauses_the_run_and_blames_no_agent(tmp_path) -> None:
    with killable_services(tmp_path, victim="env", delay=2.0) as services:
        env = services.processes["env"].target
        with pytest.raises(Unavailable) as info:
            run_rlgpt(options(tmp_path / "client", planner=services.planner, env_servers=1))
        assert services.script.killed.is_set()
        # No agent was asked anything after the skill: no critic verdict, no rewrite.
        assert services.script.asked == ["Plan", "SkillAnswer"]
        message = str(info.value)
        assert f"the run stopped: the env server at {env} is unavailable (" in message
        assert "the run is paused: resume it with --resume once the env server is back" in message
        resume = re.search(rf"Resume with: rlgpt run --resume (\S+) --planner {services.planner}$", message)
        assert resume, message
        run_dir = tmp_path / "planner" / "runs" / resume.group(1)
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        assert not [e for e in events if "verdict" in e], "a verdict was given on a skill whose env server died"
        assert events[-1]["error"]["resumable"] and f"the env server at {env}" in events[-1]["error"]["message"]
        assert "UNAVAILABLE" not in json.dumps(json.loads((run_dir / "state.json").read_text())["subtasks"])
