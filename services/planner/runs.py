"""A run: its directory, state and event stream (``events.jsonl``), shared by the servicer and the loops."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from rlgpt import metrics
from rlgpt.errors import FailedPrecondition, InvalidArgument, NotFound, shown
from rlgpt.llm.client import CallRecord, record_json
from rlgpt.v1 import planner_pb2

RUN_ID_CHARS = 200
"""Max characters of a run id."""
RUN_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{RUN_ID_CHARS - 1}}}")
"""A run id: the name of its directory under the planner's runs directory, so never a path."""


def own_run_dir(runs_dir: Path, run_id: str) -> Path | None:
    """``runs_dir/<run_id>`` (``run_id`` checked by :func:`check_run_id`) when it holds a run and lies inside
    ``runs_dir`` (a link there does not lead out of it); None otherwise."""
    run_dir = runs_dir / run_id
    try:
        inside = run_dir.resolve().parent == runs_dir.resolve()
        return run_dir if inside and (run_dir / "request.json").is_file() else None
    except OSError:
        return None


def run_id_of_dir(path: str, runs_dir: Path) -> str:
    """The id of the run a client named by its directory, which must be one of ``runs_dir``'s in the form StartRun
    answered (``runs_dir/<id>``, as configured or absolute), compared as text: a client's path is never looked up on
    the planner's disk. Anything else is NotFound, quoting a short prefix of ``path`` and no path of the planner's."""
    name = os.path.basename(os.path.normpath(path))
    forms = {os.path.normpath(runs_dir / name), os.path.normpath(os.path.abspath(runs_dir / name))}
    if not RUN_ID.fullmatch(name) or os.path.normpath(path) not in forms:
        raise NotFound(f"resume_run_dir={shown(path)} is no run of this planner: resume one of its runs by its id "
                       "(resume_run_id, the run_id StartRun answered)")
    return name


def check_run_id(run_id: str, field: str = "run_id") -> None:
    """Raises InvalidArgument unless ``run_id`` has the form of a run id."""
    if not run_id:
        raise InvalidArgument(f"{field} is empty: give the run id StartRun returned")
    if not RUN_ID.fullmatch(run_id):
        raise InvalidArgument(f"{field}={shown(run_id)} is not a run id: a run id is 1..200 letters, digits, '_', "
                              "'-' or '.', starting with a letter or digit (the run_id StartRun returned)")


class Run:
    """State and events of one run; thread-safe."""

    def __init__(self, run_dir: Path, request: planner_pb2.StartRunRequest,
                 events: list[planner_pb2.RunEvent] | None = None):
        self.dir = run_dir
        self.id = run_dir.name
        self.request = request
        self.state = planner_pb2.RUN_STATE_RUNNING
        self.plan = planner_pb2.Plan()
        self.iteration = 0
        self.tokens = 0
        self.success_rate = 0.0
        self.error = ""
        self.report_problem = ""
        """Why the report could not be written when the run ended ("" when it was)."""
        self.events: list[planner_pb2.RunEvent] = list(events or [])
        self.stop_requested = threading.Event()
        self._llm_calls: int | None = None  # calls recorded in llm/, counted on first use (resume)
        self._changed = threading.Condition()
        self.dir.mkdir(parents=True, exist_ok=True)
        if events is None:
            (self.dir / "request.json").write_text(json_format.MessageToJson(request))

    @classmethod
    def create(cls, root: Path, request: planner_pb2.StartRunRequest) -> Run:
        # A directory name, never a path, and a run id (check_run_id): the run is resumed by it.
        name = re.sub(r"[^A-Za-z0-9_-]", "_", request.task.name).lstrip("_-")[:48] or "task"
        return cls(root / f"{name}__{time.strftime('%Y%m%d-%H%M%S')}__{uuid.uuid4().hex[:6]}", request)

    @classmethod
    def resume(cls, run_dir: Path) -> Run:
        """Reopens a run directory; a missing or corrupt file is named in a FailedPrecondition (by the run's and
        the file's names: a client learns no path of the planner's disk)."""
        request_path, events_path = run_dir / "request.json", run_dir / "events.jsonl"
        if not request_path.exists():
            raise FailedPrecondition(f"{run_dir.name} is not a run directory: request.json is missing")
        try:
            request = json_format.Parse(request_path.read_text(), planner_pb2.StartRunRequest())
        except (json_format.ParseError, ValueError) as exc:
            raise FailedPrecondition(f"run {run_dir.name} is corrupt: request.json cannot be read "
                                     f"({str(exc)[:200]})") from exc
        events: list[planner_pb2.RunEvent] = []
        if events_path.exists():
            for number, line in enumerate(events_path.read_text().splitlines(), start=1):
                try:
                    events.append(json_format.Parse(line, planner_pb2.RunEvent()))
                except (json_format.ParseError, ValueError) as exc:
                    raise FailedPrecondition(f"run {run_dir.name} is corrupt: events.jsonl line {number} cannot "
                                             f"be read ({str(exc)[:200]})") from exc
        return cls(run_dir, request, events)

    def emit(self, subtask: str = "", **payload: Any) -> planner_pb2.RunEvent:
        """Appends one event (exactly one payload field) and wakes watchers."""
        with self._changed:
            event = planner_pb2.RunEvent(run_id=self.id, seq=len(self.events) + 1, time=time.time(),
                                         iteration=self.iteration, subtask=subtask, **payload)
            self.events.append(event)
            with (self.dir / "events.jsonl").open("a") as f:
                f.write(json_format.MessageToJson(event, indent=None) + "\n")
            self._changed.notify_all()
        return event

    def llm_call(self, record: CallRecord, subtask: str = "") -> None:
        """Counts the call's tokens, keeps its record in ``llm/`` (named by the call's number in this run, then
        iteration, sub-task and agent, so the files sort in call order and ``rlgpt run --replay`` replays the run)
        and emits it. Planner and critic calls share the numbering; a resumed run goes on from its last call."""
        with self._changed:
            folder = self.dir / "llm"
            folder.mkdir(exist_ok=True)
            if self._llm_calls is None:
                self._llm_calls = max((int(p.name[:5]) for p in folder.glob("*.json") if p.name[:5].isdigit()),
                                      default=0)
            self._llm_calls += 1
            path = folder / f"{self._llm_calls:05d}-iter{self.iteration}-{subtask or 'plan'}-{record.agent}.json"
        path.write_text(record_json(record))
        record.path = str(path)
        self.tokens += record.prompt_tokens + record.completion_tokens
        metrics.PLANNER_LLM_TOKENS.labels(record.agent, "prompt").inc(record.prompt_tokens)
        metrics.PLANNER_LLM_TOKENS.labels(record.agent, "completion").inc(record.completion_tokens)
        self.emit(subtask, llm=planner_pb2.LlmCall(agent=record.agent, prompt_tokens=record.prompt_tokens,
                                                   completion_tokens=record.completion_tokens,
                                                   latency_seconds=record.latency_seconds, record=record.path))

    def finish(self, state: int, error: str = "") -> None:
        with self._changed:
            self.state = state
            self.error = error
            self._changed.notify_all()
        self.save_status()

    def status(self) -> planner_pb2.RunStatus:
        return planner_pb2.RunStatus(run_id=self.id, state=self.state, plan=self.plan, iteration=self.iteration,
                                     run_dir=str(self.dir), tokens=self.tokens, success_rate=self.success_rate,
                                     error=self.error)

    def save_status(self) -> None:
        (self.dir / "status.json").write_text(json_format.MessageToJson(self.status()))

    @property
    def active(self) -> bool:
        return self.state == planner_pb2.RUN_STATE_RUNNING

    def watch(self, after_seq: int, is_active: Callable[[], bool]) -> Iterator[planner_pb2.RunEvent]:
        """Events with seq > after_seq, live, until the run ends and every event was sent."""
        sent = after_seq
        while is_active():
            with self._changed:
                pending = self.events[sent:]
                if not pending:
                    if not self.active:
                        return
                    self._changed.wait(timeout=1.0)
                    continue
            yield from pending
            sent += len(pending)
