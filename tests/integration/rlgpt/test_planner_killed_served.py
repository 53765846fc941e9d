"""The planner SIGKILLed while `rlgpt run --planner` follows its run (issue 38, item 6): the command says which service
failed, at which address, and how to resume, and exits 1 without a traceback (it ended in a raw gRPC traceback from
its WatchRun loop). The planner started again, the command it printed resumes the run to its end with nothing done
before the kill lost (the first sub-task's attempt and library skill, the plan: no agent is asked for them again),
and the report counts the whole run: every LLM call, the one whose skill test the kill cut included, and every frame
its events show. The `rlgpt` command as a process, real services on loopback, a scripted LLM (test double)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from fault_support import RESUME, TWO_LINKS, RunFiles, assert_nothing_lost, assert_whole_run_counted, killable_services
from rlgpt_run_support import asked_subtask, schema_of

pytestmark = pytest.mark.timeout(600)


def rlgpt_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlgpt.app.cli", "run", *args], capture_output=True, text=True,
                          timeout=300)


def test_a_dead_planner_is_named_with_how_to_resume(tmp_path: Path) -> None:
    client = str(tmp_path / "client")
    with killable_services(tmp_path, victim="planner", delay=1.0, at=2, plan=TWO_LINKS) as services:
        planner = services.planner
        done = rlgpt_run("--planner", planner, "--task", "collect_wood", "--runs-dir", client, "--outer", "1",
                         "--inner", "1", "--candidates", "1", "--eval-episodes", "2", "--total-frames", "6000",
                         "--seed", "3")
        assert services.script.killed.is_set()
        assert done.returncode == 1, done.stderr[-3000:]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        error = done.stderr[done.stderr.index("error: "):]
        flat = " ".join(error.split())  # the console wraps long lines
        assert flat.startswith(f"error: the planner at {planner} is unavailable (WatchRun: UNAVAILABLE: "), flat
        assert re.search(rf"run \S+ stopped with it, its state kept up to its last step\. {RESUME.pattern} once the "
                         r"planner is back$", flat), flat
        run_id, address = RESUME.search(flat).groups()
        assert address == planner
        paused = RunFiles.read(services.runs / run_id)
        assert paused.state["subtasks"]["first_wood"]["status"] == "done" and "first_wood" in paused.library

        services.restart("planner")
        resumed = rlgpt_run("--resume", run_id, "--planner", address, "--runs-dir", client)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        finished = RunFiles.read(services.runs / run_id)
        asked = [(schema_of(body), asked_subtask(body)) for body in services.llm.requests]
    assert asked.count(("Plan", "")) == 1, "the plan was asked for again"
    assert asked.count(("SkillAnswer", "first_wood")) == 1, "first_wood, done before the kill, was coded again"
    assert asked.count(("SkillAnswer", "get_wood")) == 2  # the skill whose test the kill cut, then its resumed attempt
    assert_nothing_lost(paused, finished)
    assert_whole_run_counted(finished, llm_calls=len(asked))
    assert (tmp_path / "client" / run_id / "report.md").read_text() == finished.report
