"""What the fault tests of a run share (issue 38, item 6): the four services started apart from the client, as
processes a test can SIGKILL and start again on the same port, with a scripted LLM (test double) that answers a
wood run by code and kills a service while a skill test runs; what a run's files say it cost and did, to check that
a resumed run lost nothing done before the fault and counts the whole run."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply
from google.protobuf import json_format
from rlgpt_run_support import PLAN, WOOD_ANSWERS, options, schema_of, subtask

from rlgpt.app import runner
from rlgpt.app.launcher import ServiceProcess, start_service
from rlgpt.v1 import planner_pb2

SLOW_SKILL = ("def skill(agent):\n    while True:\n        n = 0\n        for i in range(20000):\n            n += i\n"
              "        yield 'noop'\n")
"""A skill that keeps its test busy for many seconds (a loop between yields), so a kill lands inside it."""
TWO_LINKS = {"rationale": "wood by code, twice", "subtasks": [
    subtask("first_wood", "code", item="wood", count=1), PLAN["subtasks"][0]]}
"""A plan of two coded sub-tasks (the second, get_wood, ends in the task's success): the first one is done before a
kill during the second's test."""
TOKENS_PER_CALL = 18
"""The usage the LLM test double answers every call with (11 prompt + 7 completion tokens)."""
RESUME = re.compile(r"Resume with: rlgpt run --resume (\S+) --planner (\S+)")
"""The command a paused run's message tells the user to run."""


class KillDuringSkillTest:
    """Answers each schema as WOOD_ANSWERS (the plan ``plan``; ``answers`` adds schemas, a list answering the n-th
    call with its n-th entry, its last one after), the ``at``-th skill it is asked for with ``SLOW_SKILL`` and
    SIGKILLs ``victim`` ``delay`` seconds after that answer (the planner tests the skill by then); ``at`` 0: never
    (the test kills, e.g. :func:`kill_when_training`). Keeps the schema of every request."""

    def __init__(self, delay: float, at: int = 1, plan: dict[str, Any] | None = None,
                 answers: dict[str, Any] | None = None) -> None:
        self.delay, self.at = delay, at
        self.answers = {**WOOD_ANSWERS, "Plan": plan or PLAN, **(answers or {})}
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
        if name == "SkillAnswer" and self.asked.count(name) == self.at:
            threading.Timer(self.delay, self.kill).start()
            return Reply.json({**self.answers[name], "code": SLOW_SKILL})
        answer = self.answers[name]
        if isinstance(answer, list):
            answer = answer[min(self.asked.count(name), len(answer)) - 1]
        return Reply.json(answer)


@dataclasses.dataclass
class Services:
    """The running services by name (env, learner, critic, planner), the LLM test double and its script, and how
    each service was started (to start it again)."""

    processes: dict[str, ServiceProcess]
    script: KillDuringSkillTest
    llm: FakeOpenAIServer
    root: Path
    starts: dict[str, tuple[str, Path, dict[str, Any]]]
    """By name: the arguments of its start_service call."""

    @property
    def planner(self) -> str:
        return self.processes["planner"].target

    @property
    def runs(self) -> Path:
        """The planner's runs directory."""
        return self.root / "planner" / "runs"

    def restart(self, name: str) -> ServiceProcess:
        """Starts service ``name`` again as it was started, on the port it had (its peers know that address)."""
        old = self.processes[name]
        assert old.process.poll() is not None, f"{name} is still running"
        service, log_dir, kwargs = self.starts[name]
        again = start_service(service, log_dir, **{
            **kwargs, "extra_args": (*kwargs.get("extra_args", ()), "--port", str(old.port)),
            "log_name": f"{name}-restarted"})
        self.processes[name] = again
        return again


@contextlib.contextmanager
def killable_services(root: Path, victim: str, delay: float, *, at: int = 1, plan: dict[str, Any] | None = None,
                      answers: dict[str, Any] | None = None,
                      service_env: dict[str, str] | None = None) -> Iterator[Services]:
    """The services (one env server), their runs under ``root/planner``, the LLM killing ``victim`` ``delay`` s
    into the ``at``-th skill test (:class:`KillDuringSkillTest`); ``service_env``: more settings for the services.
    Services started again (:meth:`Services.restart`) are stopped at the end too."""
    script = KillDuringSkillTest(delay, at, plan, answers)
    starts: dict[str, tuple[str, Path, dict[str, Any]]] = {}

    def recorded_start(name: str, log_dir: Path, **kwargs: Any) -> ServiceProcess:
        started = start_service(name, log_dir, **kwargs)
        starts[started.log_path.stem] = (name, log_dir, kwargs)
        return started

    with FakeOpenAIServer([script]) as llm, pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "start_service", recorded_start)
        env = {"RLGPT_LLM_BASE_URL": llm.base_url, "RLGPT_LLM_MODEL": "scripted", "RLGPT_LLM_MAX_RETRIES": "1",
               "RLGPT_LLM_BACKOFF_SECONDS": "0.01", "RLGPT_PLANNER_KEEP_PLAN": "false", **(service_env or {})}
        with runner.local_services(options(root / "planner" / "runs", env_servers=1), root / "logs",
                                   env) as processes:
            services = Services(dict(processes), script, llm, root, starts)
            script.victim = processes[victim]
            try:
                yield services
            finally:
                for name, process in services.processes.items():
                    if process is not processes.get(name):
                        process.stop()


def kill_when_training(services: Services, timeout: float = 300) -> threading.Thread:
    """A thread that SIGKILLs the script's victim once a run of ``services`` has a training event with frames (the
    learner reported the job's first frames), or after ``timeout`` seconds without one (the test then finds it
    killed too late)."""

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not services.script.killed.is_set():
            for path in services.runs.glob("*/events.jsonl"):
                for line in path.read_text().splitlines():
                    try:
                        event = json_format.Parse(line, planner_pb2.RunEvent())
                    except json_format.ParseError:  # a line being written
                        continue
                    if event.WhichOneof("payload") == "training" and event.training.env_frames > 0:
                        services.script.kill()
                        return
            time.sleep(0.2)

    thread = threading.Thread(target=watch, daemon=True, name="kill-when-training")
    thread.start()
    return thread


def trainings_of(job_dir: Path) -> list[psutil.Process]:
    """The processes training ``job_dir`` (the job and its Sample Factory workers): a test's to end."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if str(job_dir) in " ".join(process.info["cmdline"] or []):
                found.append(process)
        except psutil.Error:
            pass
    return found


@dataclasses.dataclass
class RunFiles:
    """What a run's directory says: its state, its events, its LLM records and its report."""

    state: dict[str, Any]
    events: list[planner_pb2.RunEvent]
    llm_records: list[str]
    report: str
    library: dict[str, str]
    """The skill library of the planner's runs (killable_services: ``skill_library.json`` beside them): name ->
    code."""

    @classmethod
    def read(cls, run_dir: Path) -> RunFiles:
        report, library = run_dir / "report.md", run_dir.parent / "skill_library.json"
        return cls(json.loads((run_dir / "state.json").read_text()),
                   [json_format.Parse(line, planner_pb2.RunEvent())
                    for line in (run_dir / "events.jsonl").read_text().splitlines()],
                   sorted(p.name for p in (run_dir / "llm").glob("*.json")),
                   report.read_text() if report.exists() else "",
                   {s["name"]: s["code"] for s in json.loads(library.read_text())} if library.exists() else {})

    def of(self, kind: str) -> list[planner_pb2.RunEvent]:
        """The events of one payload kind ("llm", "code", "training", ...)."""
        return [e for e in self.events if e.WhichOneof("payload") == kind]

    def training_frames(self) -> dict[str, int]:
        """Each training's frames by its job id: the most its events report."""
        trainings: dict[str, int] = {}
        for event in self.of("training"):
            job = event.training.job_id
            trainings[job] = max(trainings.get(job, 0), event.training.env_frames)
        return trainings

    def event_frames(self) -> int:
        """The frames the events show spent: every skill candidate's tests, and each training's last report."""
        return sum(e.code.frames for e in self.of("code")) + sum(self.training_frames().values())

    def event_tokens(self) -> int:
        return sum(e.llm.prompt_tokens + e.llm.completion_tokens for e in self.of("llm"))


def assert_nothing_lost(before: RunFiles, after: RunFiles) -> None:
    """What the run had done when it paused (``before``) is all in the finished run (``after``): its events, LLM
    records, finished attempts, library skills and iterations, its spent frames."""
    assert after.events[:len(before.events)] == before.events, "events from before the fault were changed"
    assert set(before.llm_records) <= set(after.llm_records), "LLM records from before the fault were lost"
    for name, sub in before.state["subtasks"].items():
        tests = after.state["subtasks"][name]["tests"]
        assert tests[:len(sub["tests"])] == sub["tests"], f"{name}'s finished attempts were lost"
        if sub["status"] == "done":
            assert after.state["subtasks"][name]["status"] == "done", f"{name}, done before the fault, is not done"
            assert after.state["subtasks"][name]["skill_code"] == sub["skill_code"], f"{name}'s code was replaced"
        assert after.state["subtasks"][name]["frames"] >= sub["frames"], f"{name}'s frames were lost"
    assert after.state["iterations"][:len(before.state["iterations"])] == before.state["iterations"], \
        "iterations from before the fault were lost"
    assert after.state["frames_used"] >= before.state["frames_used"], "frames spent before the fault were lost"
    assert before.library.items() <= after.library.items(), "library skills from before the fault were lost"


def assert_whole_run_counted(run: RunFiles, llm_calls: int) -> None:
    """The finished run counts its whole cost, before and after the fault: each of the ``llm_calls`` the LLM
    served is an event and a record, the iterations' tokens are all of them, its frames are its events' frames in
    the state and the report."""
    assert run.state["finished"], "the resumed run did not finish"
    assert len(run.of("llm")) == llm_calls == len(run.llm_records), (
        f"{len(run.of('llm'))} LLM events and {len(run.llm_records)} records for {llm_calls} calls served")
    tokens = sum(int(it["tokens"]) for it in run.state["iterations"])
    assert tokens == run.event_tokens() == TOKENS_PER_CALL * llm_calls, (
        f"the iterations count {tokens} tokens; the run's calls had {TOKENS_PER_CALL * llm_calls}")
    frames = run.state["frames_used"]
    assert frames == run.event_frames() > 0, f"the state counts {frames} frames, its events {run.event_frames()}"
    iterations = sum(int(it["frames"]) for it in run.state["iterations"])
    assert iterations == frames, f"the iterations count {iterations} of the run's {frames} frames"
    subtasks = sum(int(s["frames"]) for s in run.state["subtasks"].values())
    assert subtasks == frames, f"the sub-tasks count {subtasks} of the run's {frames} frames"
    assert f"- env frames spent (skill tests + training): {frames}\n" in run.report, run.report
    for it in run.state["iterations"]:
        assert re.search(rf"^\| {it['iteration']} \| {it['tokens']} \| \d+ \| {it['frames']} \|", run.report,
                         re.MULTILINE), run.report
