"""A session's action space: primitives (backend indices) by name, then registered skills
(``skill:<name>``), then the kept plan's action (one skill per stage), read from a CreateSessionRequest."""

from __future__ import annotations

import dataclasses

from rlgpt.env_contract import PLAN_ACTION, SKILL_PREFIX
from rlgpt.errors import InvalidArgument, join_problems, shown
from services.env_server.backends.base import Backend
from services.env_server.skills.executor import SkillRecord, SkillRegistry


@dataclasses.dataclass
class Action:
    """One entry of a session's action space: a primitive (backend index), a skill, or the kept plan (one skill
    per stage of the session; None for a stage the client plays itself)."""

    name: str
    primitive: int = -1
    skill: SkillRecord | None = None
    plan: tuple[SkillRecord | None, ...] = ()

    @property
    def macro(self) -> bool:
        return self.skill is not None or bool(self.plan)


def action_space(backend: Backend, primitives: list[str], skill_names: list[str],
                 skills: SkillRegistry) -> list[Action]:
    """The named primitives (all of the backend's when none) followed by the named skills."""
    spec = backend.spec
    problems: list[str] = []
    actions: list[Action] = []
    for name in primitives or spec.actions:
        if name not in spec.actions:
            problems.append(f"unknown primitive action {shown(name)} for {spec.name}; "
                            f"known: {', '.join(spec.actions)}")
        else:
            actions.append(Action(name=name, primitive=spec.actions.index(name)))
    if len(set(primitives)) != len(primitives):
        problems.append("primitive_actions has duplicates")
    if len(set(skill_names)) != len(skill_names):
        problems.append("skills has duplicates")
    if problems:
        raise InvalidArgument(join_problems(problems))
    for name in skill_names:
        record = skills.for_backend(name, spec.name)
        actions.append(Action(name=SKILL_PREFIX + name, skill=record))
    return actions


def plan_action(backend: Backend, plan: list[str], stages: int, skills: SkillRegistry) -> list[Action]:
    """The kept plan's action (none without a plan): one registered skill of the backend per stage, or None for a
    stage the client plays (an empty name)."""
    if not plan:
        return []
    if len(plan) != stages:
        raise InvalidArgument(f"plan names {len(plan)} skills and stages has {stages} entries: a plan needs one "
                              "skill per stage (the stage says when its skill is done)")
    records: list[SkillRecord | None] = []
    for j, name in enumerate(plan):
        if not name:
            records.append(None)  # the client plays this stage
            continue
        records.append(skills.for_backend(name, backend.spec.name, f"plan[{j}]"))
    return [Action(name=PLAN_ACTION, plan=tuple(records))]
