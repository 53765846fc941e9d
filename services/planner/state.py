"""What a run has finished, persisted in ``<run_dir>/state.json`` so ``--resume`` redoes nothing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from rlgpt.errors import FailedPrecondition
from rlgpt.v1 import planner_pb2


@dataclasses.dataclass
class SubTaskState:
    """Progress of one sub-task of the plan."""

    name: str
    status: str = "pending"
    """pending | done | failed"""
    decision: str = "code"
    skill_code: str = ""
    success_rate: float = 0.0
    job_id: str = ""
    inner_iterations: int = 0
    code_failures: int = 0
    feedback: str = ""
    frames: int = 0
    curve: list[dict[str, float]] = dataclasses.field(default_factory=list)
    """Learning curve points of every training of the sub-task: env_frames (counted over the sub-task, as
    ``frames``), success_rate, mean_return, job_id, iteration."""
    tests: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Every attempt: iteration, kind (code/rl), success_rate, frames, error."""
    rl_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The RL config the last attempt trained (``RLConfig`` as a dict), shown to the fast agent when it revises."""


@dataclasses.dataclass
class RunState:
    """Everything a resumed run needs."""

    outer_iteration: int = 0
    plan: dict[str, Any] | None = None
    plans: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    subtasks: dict[str, SubTaskState] = dataclasses.field(default_factory=dict)
    frames_used: int = 0
    slow_feedback: str = ""
    iterations: list[dict[str, float]] = dataclasses.field(default_factory=list)
    """Per outer iteration: tokens, seconds, frames."""
    final: dict[str, Any] | None = None
    finished: bool = False

    def plan_proto(self) -> planner_pb2.Plan | None:
        return json_format.ParseDict(self.plan, planner_pb2.Plan()) if self.plan else None

    def set_plan(self, plan: planner_pb2.Plan) -> None:
        self.plan = json_format.MessageToDict(plan, preserving_proto_field_name=True)
        self.plans.append(self.plan)
        for st in plan.subtasks:
            decision = "code" if st.decision == planner_pb2.DECISION_CODE else "rl"
            state = self.subtasks.setdefault(st.name, SubTaskState(name=st.name, decision=decision))
            if state.status != "done":
                state.decision = decision

    def save(self, run_dir: Path) -> None:
        tmp = run_dir / "state.json.tmp"
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=1))
        tmp.replace(run_dir / "state.json")  # atomic: a crash never leaves half a state

    @classmethod
    def load(cls, run_dir: Path) -> RunState:
        path = run_dir / "state.json"
        if not path.exists():
            return cls()
        try:
            doc = json.loads(path.read_text())
            doc["subtasks"] = {k: SubTaskState(**v) for k, v in doc.get("subtasks", {}).items()}
            return cls(**doc)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # AttributeError: not a JSON object
            raise FailedPrecondition(f"run directory {run_dir} is corrupt: {path} cannot be read ({exc}); "
                                     "fix or remove that file to resume") from exc
