"""What a run has finished, persisted in ``<run_dir>/state.json`` so ``--resume`` redoes nothing.

The vocabulary is typed (:class:`Decision`, :class:`Status`, :class:`AttemptKind`: string enums, so they are
written as the same strings runs always wrote) and every record the loops append is built from a dataclass
(:class:`TestRecord`, :class:`IterationRecord`, :class:`FinalResult`) whose ``as_json`` is the shape state.json
has always held; a state written before these types loads unchanged.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from rlgpt.errors import FailedPrecondition
from rlgpt.v1 import planner_pb2


class Decision(enum.StrEnum):
    """How a sub-task is solved: coded by the fast agent, or learned with RL."""

    CODE = "code"
    RL = "rl"

    @classmethod
    def of(cls, subtask: planner_pb2.SubTask) -> Decision:
        return cls.RL if subtask.decision == planner_pb2.DECISION_RL else cls.CODE

    @property
    def proto(self) -> planner_pb2.Decision.ValueType:
        return planner_pb2.DECISION_RL if self is Decision.RL else planner_pb2.DECISION_CODE


class Status(enum.StrEnum):
    """Where a sub-task stands."""

    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


AttemptKind = Decision
"""An attempt's kind is the decision it tried (a code test, or an RL training and its evaluation)."""


def _without_empty(record: Any, keep: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(record).items() if v or k in keep}


@dataclasses.dataclass
class TestRecord:
    """One attempt of a sub-task: its measured success (0 when it failed) and the sub-task's frames by then."""

    __test__ = False  # not a pytest class

    iteration: int
    kind: AttemptKind
    success_rate: float = 0.0
    frames: int = 0
    error: str = ""
    job_id: str = ""
    """The training of an RL attempt ("" for code, or when the learner refused the config)."""

    def as_json(self) -> dict[str, Any]:
        return _without_empty(self, ("iteration", "kind", "success_rate", "frames", "error"))


@dataclasses.dataclass
class IterationRecord:
    """What one outer iteration cost, and how the whole task's chain did after it."""

    iteration: int
    tokens: int
    seconds: float
    frames: int
    success_rate: float | None = None
    """The whole task's success with the plan's chain after this iteration (None: not evaluated, e.g. a run
    recorded before per-iteration evaluation, or one that stopped first)."""
    controller: str = ""
    """The chain that was evaluated (links and their controllers)."""
    episodes: int = 0
    failed: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The chain's failed episodes (:attr:`FinalResult.failed`): what RL around a kept plan is told."""
    successes: list[bool] = dataclasses.field(default_factory=list)
    """Per world of the evaluation, in world order (the same worlds after every iteration): whether it succeeded."""
    links: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Per link of the chain (:attr:`FinalResult.links`)."""
    kept: str = ""
    """Whether this controller replaced the best so far (the paired comparison on the same worlds, in words)."""
    verdict: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The critic's whole-task verdict after the iteration (target, subtask, diagnosis, suggestion,
    death_causes), or the planner's own where no critic judges; empty: none (the target was reached)."""
    score: float | None = None
    """A game task's measure (services/planner/game_task.py): the game's score in percent; None otherwise."""
    achievement_rates: dict[str, float] = dataclasses.field(default_factory=dict)
    """A game task's: each achievement's success rate in percent over the evaluation's episodes."""
    chain: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The controller evaluated: its ``plan`` and each sub-task's controller (``controllers``: code, the policy
    the chain ran), as the best one keeps them, so that any iteration's chain can be played again (bench-validate
    ``--iteration``), not only the one kept."""

    def as_json(self) -> dict[str, Any]:
        game = ("score", "achievement_rates")  # a game task's only
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in game or v not in (None, {})}


@dataclasses.dataclass
class FinalResult:
    """The task-level controller's evaluation of the whole task."""

    episodes: int
    frames_used: int
    controller: str = ""
    success_rate: float = 0.0
    returns: list[float] = dataclasses.field(default_factory=list)
    error: str = ""
    links: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Per link of the chain (learner-run chains): name, episodes that reached it, that met its conditions,
    mean frames spent in it."""
    failed: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Per failed episode of an all-code chain: end_reason, death_cause, steps, achievements, inventory (item ->
    count at the end) and, for the first few, the last lines of its trajectory (``tail``)."""
    successes: list[bool] = dataclasses.field(default_factory=list)
    """Per world, in world order: whether the episode succeeded (paired comparisons of controllers)."""
    seed: int = 0
    """The first world of the evaluation (world i is ``seed + i``)."""
    animations: dict[str, str] = dataclasses.field(default_factory=dict)
    """``success`` / ``failure`` -> a GIF of one such episode, relative to the run directory."""
    episode_summaries: list[Any] = dataclasses.field(default_factory=list, repr=False)
    """The evaluation's ``EpisodeSummary`` protos, in world order (for the critic and the animations; not
    saved)."""
    score: float | None = None
    """A game task's measure (services/planner/game_task.py): the game's score in percent; None otherwise."""
    achievement_rates: dict[str, float] = dataclasses.field(default_factory=dict)
    """A game task's: each achievement's success rate in percent over the episodes."""
    episodes_cut: int = 0
    """A game task's: episodes that stopped at the run's episode cap (game_task.episode_cap), short of the game's
    length."""
    episode_cap: int = 0
    """A game task's: the frames its episodes could last (0: not recorded)."""

    def as_json(self) -> dict[str, Any]:
        keep = ("episodes", "frames_used", "controller", "success_rate")
        return {f.name: value for f in dataclasses.fields(self) if f.name != "episode_summaries"
                and ((value := getattr(self, f.name)) or f.name in keep or (f.name == "score" and value is not None))}


@dataclasses.dataclass
class SubTaskState:
    """Progress of one sub-task of the plan."""

    name: str
    status: Status = Status.PENDING
    decision: Decision = Decision.CODE
    skill_code: str = ""
    success_rate: float = 0.0
    job_id: str = ""
    inner_iterations: int = 0
    code_failures: int = 0
    feedback: str = ""
    frames: int = 0
    curve: list[dict[str, float]] = dataclasses.field(default_factory=list)
    """Learning curve points of every training of the sub-task: env_frames (counted over the sub-task, as
    ``frames``), training_frames (counted over that training; absent in states written before it), success_rate,
    mean_return, job_id, iteration."""
    tests: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Every attempt, a :class:`TestRecord` as JSON."""
    rl_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The RL config the last attempt trained (``RLConfig`` as a dict), shown to the fast agent when it revises."""
    macro_actions: dict[str, str] = dataclasses.field(default_factory=dict)
    """The macro actions the fast agent wrote for the last RL config and the env server accepted: registered name
    (``<sub-task>__<name>``, in ``rl_config``'s skills) -> code; registered again on a new env server on resume."""

    policy_job: str = ""
    """The policy the chain runs, pinned when a later revision was not better on the same worlds (the whole
    task's paired comparison); empty: the best evaluated training (controller.policy_of)."""
    refused_code: str = ""
    """The last attempt's code when the env server refused it untested (registration, e.g. a code error on its test
    worlds): the next revision is shown it with its error, while the chain keeps running ``skill_code``, the latest
    code that was tested (run 6's chain could not be evaluated: a refused revision had replaced working code)."""
    replaces: str = ""
    """The sub-task of the plan in force before this one's plan that it replaces: the same success conditions under
    another name, that plan's link the new plan dropped (the slow agent renames a link to have it written again).
    Its first code attempt starts from that link's code and verdict (Attempts.code); empty: none."""
    reopened: bool = False
    """Set when the whole task's verdict sent the sub-task back to the fast agent, until its next attempt is
    configured (like every later attempt of an RL sub-task, it continues from its best policy's checkpoint,
    RLConfig.init_from_job)."""

    def __post_init__(self) -> None:
        self.status, self.decision = Status(self.status), Decision(self.decision)  # a loaded state has strings

    def record(self, test: TestRecord) -> None:
        self.tests.append(test.as_json())

    @property
    def last_error(self) -> str:
        return self.tests[-1].get("error", "") if self.tests else ""


def conditions_of(st: planner_pb2.SubTask) -> list[bytes]:
    """A sub-task's success conditions, in a fixed order: what defines it, whatever it is named."""
    return sorted(c.SerializeToString(deterministic=True) for c in st.success)


@dataclasses.dataclass
class RunState:
    """Everything a resumed run needs."""

    outer_iteration: int = 0
    plan: dict[str, Any] | None = None
    plans: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    subtasks: dict[str, SubTaskState] = dataclasses.field(default_factory=dict)
    frames_used: int = 0
    frame_budget: int = 0
    """The run's frame budget as resolved when it (last) started (0: unbounded); for its report."""
    evaluation_frames: int = 0
    """Of ``frames_used``, the whole-task evaluations' (counted for a game task only, whose every frame counts)."""
    longest_episode: int = 0
    """A game task's longest whole-task or policy evaluation episode so far (frames; 0: none measured yet): it sets
    how long later evaluations' episodes may last and so what they keep back (game_task.episode_cap)."""
    slow_feedback: str = ""
    iterations: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Per outer iteration, an :class:`IterationRecord` as JSON."""
    iteration_start: dict[str, Any] | None = None
    """The outer iteration under way: its number, the frames used as it began, its seconds in earlier processes
    and when this process's part began (:mod:`services.planner.iteration_costs`); None between iterations."""
    trainings: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """The trainings under way, by job id: their sub-task and the frames counted of them so far
    (RunContext.spend_training). One left here when the run paused during it is settled on resume
    (services/planner/trainings.py: settle_trainings)."""
    final: dict[str, Any] | None = None
    """The :class:`FinalResult` as JSON, once the whole task was evaluated."""
    kept_plan: dict[str, Any] | None = None
    """The training around the kept plan (kept_plan.py): chain_success_rate, job_id and success_rate on the
    iteration's worlds, or error; None: none was trained."""
    game_controller: dict[str, Any] | None = None
    """A game task's policy with the plan's coded skills as macro actions (game_controller.py): its job_id, score
    and rates on the iterations' worlds beside the best chain's score there, or error; None: none was trained."""
    under_way: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """A game task's final-controller candidates begun and not recorded yet, by sub-task: the fast agent's config
    answer as it arrived, the frames the training was given and the sub-task's frames before it; a resumed run
    goes on from them (services/planner/game_resume.py)."""
    best: dict[str, Any] | None = None
    """The best controller so far (services/planner/task_review.py): the iteration, its per-world successes, its
    plan and each sub-task's controller; a revision replaces it only when better on the same worlds, paired."""
    coding_failed: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Success conditions (in words, :func:`services.planner.coding_failed.conditions_key`) whose coded attempts
    all failed and moved to RL -> the sub-task, iteration, attempts and best rate; a later plan keeps them "rl"."""
    stop_reason: str = ""
    """Why the outer loop ended: the target reached, the frames or the outer iterations spent."""
    finished: bool = False

    def plan_proto(self) -> planner_pb2.Plan | None:
        return json_format.ParseDict(self.plan, planner_pb2.Plan()) if self.plan else None

    def set_plan(self, plan: planner_pb2.Plan) -> None:
        """``plan`` adopted. A sub-task keeps its progress under the same name and success conditions (a done one
        keeps its decision too; one not done follows the new plan's); a name given other conditions is another
        sub-task and starts fresh (pending, no code, no policy, no attempts): the old work met other conditions.
        A changed decision under the same conditions is not a new sub-task (coding_failed.kept_rl decides it)."""
        earlier = {st.name: conditions_of(st) for st in self._plans_before()}  # the latest plan's win
        in_force = self.plan_proto()
        names = {st.name for st in plan.subtasks}
        dropped = [st for st in (in_force.subtasks if in_force else []) if st.name not in names]
        self.plan = json_format.MessageToDict(plan, preserving_proto_field_name=True)
        self.plans.append(self.plan)
        for st in plan.subtasks:
            decision = Decision.of(st)
            if st.name in earlier and earlier[st.name] != conditions_of(st):
                self.subtasks.pop(st.name, None)  # the name is reused for other conditions
            fresh = st.name not in self.subtasks
            state = self.subtasks.setdefault(st.name, SubTaskState(name=st.name, decision=decision))
            if fresh:
                state.replaces = next((old.name for old in dropped if conditions_of(old) == conditions_of(st)
                                       and self.subtasks[old.name].skill_code), "")
            if state.status != Status.DONE:
                state.decision = decision

    def _plans_before(self) -> list[planner_pb2.SubTask]:
        """The sub-tasks of the earlier plans, latest last; the current plan (a restored best one may be an
        earlier plan again: the sub-tasks' work is its) counts as the latest."""
        plans = [*self.plans, *([self.plan] if self.plan else [])]
        return [st for doc in plans
                for st in json_format.ParseDict(doc, planner_pb2.Plan(), ignore_unknown_fields=True).subtasks]

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
            if not doc.get("longest_episode"):  # saved before the field: its evaluations' recorded episodes say
                doc["longest_episode"] = max((int(e.get("steps", 0)) for it in doc.get("iterations", [])
                                              for e in it.get("failed", [])), default=0)
            return cls(**doc)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # AttributeError: not a JSON object
            raise FailedPrecondition(f"run directory {run_dir} is corrupt: {path} cannot be read ({exc}); "
                                     "fix or remove that file to resume") from exc
