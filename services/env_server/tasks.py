"""Tasks (success conditions, start inventories), stages (extra condition sets) and dense reward terms, checked
against a backend.

A backend offers two kinds of tasks by name: each achievement (its success condition), and the whole game
(``BackendSpec.game_task``, e.g. "crafter": TaskSpec.objective "game", no success condition, the benchmark's
episode length and reward). Any other task must spell out its success conditions; an unknown name is NOT_FOUND,
listing what the backend offers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from rlgpt import reward_kinds
from rlgpt.env_contract import GAME_OBJECTIVE
from rlgpt.errors import InvalidArgument, NotFound, join_problems, shown
from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.backends.base import BackendSpec

REWARD_KINDS = tuple(reward_kinds.REWARD_KINDS)
MAX_ITEM_COUNT = 1000
LISTED_TASKS = 40
"""Most task names an unknown task's NOT_FOUND lists (Crafter offers 23; the rest are counted)."""


@dataclasses.dataclass(frozen=True)
class Task:
    """A validated task: all ``achievements`` unlocked and all ``inventory`` thresholds met = success."""

    name: str
    achievements: tuple[str, ...]
    inventory: tuple[tuple[str, int], ...]
    start_inventory: tuple[tuple[str, int], ...]
    terminate_on_success: bool
    game: bool = False
    """The backend's whole-game task (open-ended: its episodes last until death or their length)."""

    @property
    def open_ended(self) -> bool:
        return not self.achievements and not self.inventory

    def holds(self, unlocked: set[str], inventory: dict[str, int]) -> bool:
        """Whether the success conditions hold for this state."""
        if self.open_ended:
            return False
        return (all(a in unlocked for a in self.achievements)
                and all(inventory.get(item, 0) >= count for item, count in self.inventory))


@dataclasses.dataclass(frozen=True)
class RewardTerm:
    """One validated dense reward term (see ``rlgpt.v1.RewardTerm`` for the vocabulary)."""

    kind: str
    target: str
    weight: float


def _parse_conditions(conditions: Sequence[common_pb2.Condition], backend: BackendSpec, field: str,
                      problems: list[str]) -> tuple[list[str], list[tuple[str, int]]]:
    """The achievements and inventory thresholds of ``conditions``; their problems go to ``problems``."""
    achievements: list[str] = []
    inventory: list[tuple[str, int]] = []
    for i, cond in enumerate(conditions):
        kind = cond.WhichOneof("kind")
        if kind == "achievement":
            if cond.achievement not in backend.achievements:
                problems.append(f"{field}[{i}]: unknown achievement {shown(cond.achievement)} for "
                                f"{backend.name}; known: {', '.join(backend.achievements)}")
            achievements.append(cond.achievement)
        elif kind == "inventory":
            item, count = cond.inventory.item, cond.inventory.count
            if item not in backend.items:
                problems.append(f"{field}[{i}]: unknown item {shown(item)} for {backend.name}; "
                                f"known: {', '.join(backend.items)}")
            if not 1 <= count <= MAX_ITEM_COUNT:
                problems.append(f"{field}[{i}]: inventory count {count} must be in 1..{MAX_ITEM_COUNT}")
            inventory.append((item, count))
        else:
            problems.append(f"{field}[{i}]: empty condition (set achievement or inventory)")
    return achievements, inventory


def is_game_task(spec: common_pb2.TaskSpec, backend: BackendSpec) -> bool:
    """Whether ``spec`` is the backend's whole-game task: its name, no success conditions."""
    return bool(backend.game_task) and spec.name == backend.game_task and not spec.success


def offered_tasks(backend: BackendSpec) -> str:
    """The tasks ``backend`` offers by name, in words (an unknown task's NOT_FOUND)."""
    names = backend.achievements
    listed = ", ".join(names[:LISTED_TASKS]) + (f", ... ({len(names)} in all; Describe lists them)"
                                                if len(names) > LISTED_TASKS else "")
    game = (f"{backend.game_task} (the whole game, scored as its benchmark scores it) and"
            if backend.game_task else "no whole-game task;")
    return f"{backend.name} offers {game} its achievements: {listed}; any other task needs task.success"


def _objective_problems(spec: common_pb2.TaskSpec, backend: BackendSpec) -> list[str]:
    problems = []
    if spec.objective not in ("", GAME_OBJECTIVE):
        problems.append(f"task.objective {shown(spec.objective)}: must be empty or {GAME_OBJECTIVE!r}")
    elif spec.objective == GAME_OBJECTIVE and not is_game_task(spec, backend):
        where = (f"task {backend.game_task!r} without success conditions" if backend.game_task
                 else f"none: {backend.name} offers no whole-game task")
        problems.append(f"task.objective {GAME_OBJECTIVE!r} is the whole game's ({where})")
    if spec.episode_length < 0:
        problems.append(f"task.episode_length={spec.episode_length} must be >= 0 (0: the caller's choice)")
    return problems


def parse_task(spec: common_pb2.TaskSpec, backend: BackendSpec) -> Task:
    """Checks a TaskSpec against the backend's vocabulary; every problem is reported in one error (a name the
    backend does not offer, without success conditions: NotFound, listing what it offers)."""
    problems = _objective_problems(spec, backend)
    achievements, inventory = _parse_conditions(spec.success, backend, "task.success", problems)
    if not spec.success and spec.name and not is_game_task(spec, backend):
        if spec.name not in backend.achievements:
            raise NotFound(f"no task {shown(spec.name)} on {backend.name}: {offered_tasks(backend)}")
        achievements.append(spec.name)
    start: list[tuple[str, int]] = []
    for i, item_count in enumerate(spec.start_inventory):
        if item_count.item not in backend.items:
            problems.append(f"task.start_inventory[{i}]: unknown item {shown(item_count.item)} for {backend.name}")
        if not 0 <= item_count.count <= MAX_ITEM_COUNT:
            problems.append(f"task.start_inventory[{i}]: count {item_count.count} must be in 0..{MAX_ITEM_COUNT}")
        start.append((item_count.item, item_count.count))
    if problems:
        raise InvalidArgument(join_problems(problems))
    return Task(name=spec.name or "open_ended", achievements=tuple(achievements), inventory=tuple(inventory),
                start_inventory=tuple(start), terminate_on_success=spec.terminate_on_success,
                game=is_game_task(spec, backend))


def parse_stages(stages: Sequence[env_pb2.Stage | common_pb2.PrefixStep], backend: BackendSpec,
                 field: str = "stages") -> tuple[Task, ...]:
    """A session's stages (or its prefix steps' conditions, ``field`` "prefix") as Tasks with no start inventory,
    so that ``Task.holds`` judges them as it judges the task (a stage without conditions is open-ended: never
    done); every problem is reported in one error."""
    problems: list[str] = []
    parsed: list[Task] = []
    for j, stage in enumerate(stages):
        achievements, inventory = _parse_conditions(stage.success, backend, f"{field}[{j}].success", problems)
        parsed.append(Task(name=f"stage {j}", achievements=tuple(achievements), inventory=tuple(inventory),
                           start_inventory=(), terminate_on_success=False))
    if problems:
        raise InvalidArgument(join_problems(problems))
    return tuple(parsed)


def game_description(backend: BackendSpec, episode_length: int) -> str:
    """What the whole-game task asks, in words (its TaskSpec.description)."""
    return (f"Play the whole game of {backend.display_name or backend.name} as its benchmark does: unlock as many "
            f"of its {len(backend.achievements)} achievements as possible in each episode ({episode_length} frames "
            "or until the player dies), with the game's own reward. The measure is the score over the "
            "achievements' success rates across episodes (each achievement counts once per episode); no episode "
            "succeeds or ends early.")


def resolve_task(spec: common_pb2.TaskSpec, backend: BackendSpec) -> common_pb2.TaskSpec:
    """The task checked (InvalidArgument lists every problem; NotFound: a name the backend does not offer) and
    with its success conditions spelled out; the whole-game task gets its objective, the benchmark's episode
    length and reward (where the request left them unset) and the game's description (where the request's says no
    more than the name)."""
    task = parse_task(spec, backend)
    if spec.reward_terms:
        parse_reward_terms(list(spec.reward_terms), backend)
    resolved = common_pb2.TaskSpec()
    resolved.CopyFrom(spec)
    if is_game_task(spec, backend):
        resolved.objective = GAME_OBJECTIVE
        resolved.episode_length = spec.episode_length or backend.default_episode_length
        if not spec.reward_terms:
            resolved.reward_terms.add(kind="native", weight=1.0)  # the game's own reward, as its benchmark pays it
        if spec.description in ("", spec.name):
            resolved.description = game_description(backend, resolved.episode_length)
    elif not spec.success:
        resolved.success.extend(common_pb2.Condition(achievement=a) for a in task.achievements)
    return resolved


def parse_reward_terms(terms: list[common_pb2.RewardTerm], backend: BackendSpec) -> tuple[RewardTerm, ...]:
    """Checks reward terms against the vocabulary; no terms means the backend's native reward."""
    if not terms:
        return (RewardTerm("native", "", 1.0),)
    problems: list[str] = []
    parsed: list[RewardTerm] = []
    for i, term in enumerate(terms):
        if term.kind not in REWARD_KINDS:
            problems.append(f"reward_terms[{i}]: unknown kind {shown(term.kind)}; known: {', '.join(REWARD_KINDS)}")
            continue
        if not math.isfinite(term.weight):
            problems.append(f"reward_terms[{i}]: weight must be finite, got {term.weight}")
        if reward_kinds.takes_target(term.kind):
            vocabulary = backend.achievements if term.kind == "achievement" else backend.items
            if term.target != "*" and term.target not in vocabulary:
                problems.append(f"reward_terms[{i}]: unknown {term.kind} target {shown(term.target)} for "
                                f"{backend.name} (use '*' for any)")
        elif term.target:
            problems.append(f"reward_terms[{i}]: kind {shown(term.kind)} takes no target, got {shown(term.target)}")
        parsed.append(RewardTerm(term.kind, term.target, float(term.weight)))
    if problems:
        raise InvalidArgument(join_problems(problems))
    return tuple(parsed)


def step_reward(terms: tuple[RewardTerm, ...], *, native: float, newly_unlocked: set[str],
                gained: dict[str, int], health_delta: float, died: bool, just_succeeded: bool,
                stages_done: int = 0) -> float:
    """The dense reward of one primitive frame."""
    total = 0.0
    for term in terms:
        if term.kind == "native":
            total += term.weight * native
        elif term.kind == "step":
            total += term.weight
        elif term.kind == "success":
            total += term.weight if just_succeeded else 0.0
        elif term.kind == "achievement":
            hits = len(newly_unlocked) if term.target == "*" else int(term.target in newly_unlocked)
            total += term.weight * hits
        elif term.kind == "inventory_gain":
            amount = sum(gained.values()) if term.target == "*" else gained.get(term.target, 0)
            total += term.weight * amount
        elif term.kind == "health":
            total += term.weight * health_delta
        elif term.kind == "death":
            total += term.weight if died else 0.0
        elif term.kind == "stage":
            total += term.weight * stages_done
    return total
