"""What the fault tests of a run share (issue 38, item 6): the four services started apart from the client, as
processes a test can SIGKILL, with a scripted LLM (test double) that answers a one-subtask wood run by code and,
when the fast agent asks for the skill, kills a service while its skill test runs."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

from fakes.fake_openai import FakeOpenAIServer, Reply
from rlgpt_run_support import WOOD_ANSWERS, options, schema_of

from rlgpt.app.launcher import ServiceProcess
from rlgpt.app.runner import local_services

SLOW_SKILL = ("def skill(agent):\n    while True:\n        n = 0\n        for i in range(20000):\n            n += i\n"
              "        yield 'noop'\n")
"""A skill that keeps its test busy for many seconds (a loop between yields), so a kill lands inside it."""


class KillDuringSkillTest:
    """Answers each schema as WOOD_ANSWERS but the skill (``SLOW_SKILL``); the first SkillAnswer request SIGKILLs
    ``victim`` ``delay`` seconds later (the planner tests the skill by then). Keeps the schema of every request."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.victim: ServiceProcess | None = None
        self.asked: list[str] = []
        self.killed = threading.Event()

    def kill(self) -> None:
        assert self.victim is not None
        self.victim.process.kill()
        self.victim.process.wait(timeout=30)  # reaped: its port is closed, its pid gone
        self.killed.set()

    def __call__(self, body: dict) -> Reply:
        name = schema_of(body)
        self.asked.append(name)
        if name == "SkillAnswer":
            if self.asked.count(name) == 1:
                threading.Timer(self.delay, self.kill).start()
            return Reply.json({**WOOD_ANSWERS[name], "code": SLOW_SKILL})
        return Reply.json(WOOD_ANSWERS[name])


@dataclasses.dataclass
class Services:
    """The running services by name (env, learner, critic, planner) and the LLM's script."""

    processes: dict[str, ServiceProcess]
    script: KillDuringSkillTest

    @property
    def planner(self) -> str:
        return self.processes["planner"].target


@contextlib.contextmanager
def killable_services(root: Path, victim: str, delay: float) -> Iterator[Services]:
    """The services (one env server), their runs under ``root/planner``, the LLM killing ``victim`` ``delay`` s
    into the first skill test."""
    script = KillDuringSkillTest(delay)
    with FakeOpenAIServer([script]) as llm:
        service_env = {"RLGPT_LLM_BASE_URL": llm.base_url, "RLGPT_LLM_MODEL": "scripted",
                       "RLGPT_LLM_MAX_RETRIES": "1", "RLGPT_LLM_BACKOFF_SECONDS": "0.01"}
        with local_services(options(root / "planner" / "runs", env_servers=1), root / "logs",
                            service_env) as processes:
            script.victim = processes[victim]
            yield Services(processes, script)
