"""Training jobs: their on-disk state, runners (local subprocess, Kubernetes Job) and the watchdog.

Everything about a job lives in ``<run_dir>/jobs/<job_id>/``: ``config.json`` (the validated
RLConfig and where the env server is), ``state.json`` (state and message), ``progress.jsonl``
(written by the training process), ``error.json`` (a fatal error the training process diagnosed),
``stop`` (a stop request), ``train.log`` and Sample Factory's experiment with its checkpoints under
``sf/``. The same files work for both runners: a Kubernetes Job mounts the run dir.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from rlgpt.errors import InvalidArgument
from rlgpt.v1 import learner_pb2

log = logging.getLogger(__name__)
_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
LEARNER_PID_ENV = "RLGPT_LEARNER_PID"


TRAIN_MODULE = "services.learner.train"
"""The module that trains one job: ``python -m TRAIN_MODULE JOB_DIR``."""


def train_command(job_dir: Path, module: str = TRAIN_MODULE) -> list[str]:
    """The command that runs one training job (locally, or as the container command of a Kubernetes Job);
    ``module``: another entry point that trains a job directory the same way (a benchmark's in-process env)."""
    return ["python", "-m", module, str(job_dir)]


class JobHandle(abc.ABC):
    """A launched training process, wherever it runs."""

    @abc.abstractmethod
    def poll(self) -> int | None:
        """Exit code when it ended, None while it runs."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Ends it now (the stop file is the polite way; this is the last resort)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where it runs, for messages (a pid, a Job name)."""


class JobRunner(abc.ABC):
    """Launches training processes for jobs."""

    name: str

    @abc.abstractmethod
    def launch(self, job_id: str, job_dir: Path, config: learner_pb2.RLConfig) -> JobHandle:
        """Starts ``train_command(job_dir)`` for the job."""

    @abc.abstractmethod
    def reattach(self, job_id: str, job_dir: Path) -> JobHandle | None:
        """A handle to a job launched before a learner restart, or None when it no longer runs."""


def kill_group(process: subprocess.Popen) -> None:
    """Kills a process started in a session of its own and all that is left in its process group (Sample
    Factory's rollout and learner processes, even once their parent has exited), then reaps it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        log.error("training process %d survived SIGKILL", process.pid)


class LocalHandle(JobHandle):
    """A training process on this machine, the leader of its own process group."""

    def __init__(self, process: subprocess.Popen):
        self.process = process

    def poll(self) -> int | None:
        return self.process.poll()

    def kill(self) -> None:
        if self.process.poll() is None:
            kill_group(self.process)

    def describe(self) -> str:
        return f"local pid {self.process.pid}"


class LocalRunner(JobRunner):
    """Runs each job as a subprocess (its own process group) on this machine: the learner's jobs and the
    benchmarks' trainings alike."""

    name = "local"

    def __init__(self, module: str = TRAIN_MODULE, env: Mapping[str, str] | None = None) -> None:
        self.module = module
        """The training entry point (``train_command``'s module)."""
        self.env = dict(env or {})
        """Added to this process's environment for each training process."""

    def launch(self, job_id: str, job_dir: Path, config: learner_pb2.RLConfig) -> LocalHandle:
        command = train_command(job_dir, self.module)
        command[0] = sys.executable
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = _PROJECT_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env[LEARNER_PID_ENV] = str(os.getpid())  # the job ends itself if its launcher dies (no orphans)
        with (job_dir / "train.log").open("ab") as log_file:
            process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                       cwd=_PROJECT_ROOT, start_new_session=True)
        return LocalHandle(process)

    def reattach(self, job_id: str, job_dir: Path) -> JobHandle | None:
        return None  # a local training process dies with its learner's process group or is orphaned; not adopted


@dataclasses.dataclass
class JobRecord:
    """A job's persistent state (``state.json``) and its live handle."""

    job_id: str
    job_dir: Path
    config: learner_pb2.RLConfig
    state: int = learner_pb2.JOB_STATE_PENDING
    message: str = ""
    started_at: float = 0.0
    handle: JobHandle | None = None
    resumes: int = 0
    error_noticed_at: float = 0.0
    """When the watchdog first saw the job's error.json (0: not seen); the job gets a grace to exit by itself."""

    @property
    def state_path(self) -> Path:
        return self.job_dir / "state.json"

    def save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"job_id": self.job_id, "state": learner_pb2.JobState.Name(self.state),
                                   "message": self.message, "started_at": self.started_at,
                                   "resumes": self.resumes}))
        tmp.replace(self.state_path)  # atomic: a crash never leaves half a state file

    @classmethod
    def load(cls, job_dir: Path) -> JobRecord:
        config_path, state_path = job_dir / "config.json", job_dir / "state.json"
        try:
            config_doc = json.loads(config_path.read_text())
            state_doc = json.loads(state_path.read_text())
            config = json_format.ParseDict(config_doc["config"], learner_pb2.RLConfig())
            state = learner_pb2.JobState.Value(state_doc["state"])
            return cls(job_id=state_doc["job_id"], job_dir=job_dir, config=config, state=state,
                       message=state_doc.get("message", ""), started_at=state_doc.get("started_at", 0.0),
                       resumes=state_doc.get("resumes", 0))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, json_format.ParseError) as exc:
            raise InvalidArgument(f"job directory {job_dir} is unreadable ({type(exc).__name__}: {exc}); "
                                  f"fix or remove {config_path.name}/{state_path.name}") from exc


def write_job_config(job_dir: Path, config: learner_pb2.RLConfig, extra: dict[str, Any]) -> None:
    """Writes ``config.json``: the RLConfig plus what the training process needs to reach its env server."""
    doc = {"config": json_format.MessageToDict(config, preserving_proto_field_name=True), **extra}
    (job_dir / "config.json").write_text(json.dumps(doc, indent=2))


def prepare_job_dir(job_dir: Path, config: learner_pb2.RLConfig, extra: dict[str, Any]) -> None:
    """Readies a job directory for a launch, its first or a resume from its checkpoint: writes ``config.json``
    and removes what an earlier run left that would end the new one at once (a stop request, a diagnosed error)."""
    write_job_config(job_dir, config, extra)
    for name in ("stop", "error.json"):
        (job_dir / name).unlink(missing_ok=True)


def read_progress(job_dir: Path, after_line: int = 0) -> list[dict[str, Any]]:
    """Progress records from line ``after_line`` on (a half-written last line is left for next time)."""
    path = job_dir / "progress.jsonl"
    if not path.exists():
        return []
    records = []
    with path.open() as f:
        for i, line in enumerate(f):
            if i < after_line:
                continue
            if not line.endswith("\n"):
                break
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return records


def last_error(job_dir: Path, lines: int = 12) -> str:
    """The training process's own diagnosis (error.json), else the tail of its log around the last traceback."""
    error_path = job_dir / "error.json"
    if error_path.exists():
        try:
            return json.loads(error_path.read_text())["message"]
        except (ValueError, KeyError, OSError):
            pass
    log_path = job_dir / "train.log"
    if not log_path.exists():
        return ""
    text = log_path.read_text(errors="replace").splitlines()
    for i in range(len(text) - 1, -1, -1):
        if text[i].startswith("Traceback"):
            return "\n".join(text[i:i + 40])[-3000:]
    return "\n".join(text[-lines:])[-3000:]


def wait_for_exit(handle: JobHandle, seconds: float) -> int | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        code = handle.poll()
        if code is not None:
            return code
        time.sleep(0.2)
    return handle.poll()
