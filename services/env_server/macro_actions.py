"""Coded skills as macro actions: a skill action of a batched step runs its skill in the sandbox for up
to ``skill_max_steps`` frames, or until it returns, fails or the caller stops it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlgpt import metrics
from services.env_server.skills.executor import SkillExecutor, SkillRecord

if TYPE_CHECKING:
    from services.env_server.session import Session, StepOutcome

SKILL_PREFIX = "skill:"
"""Skill actions are named ``skill:<name>`` in a session's action space."""


def run_skills(session: Session, executor: SkillExecutor, envs: list[int], actions: list[int], out: StepOutcome,
               should_stop: Callable[[], bool] | None) -> None:
    """Runs the skill actions of ``envs`` together, one frame of each per round, into ``out``."""
    names = list(session.backend.spec.actions)
    active: list[int] = []
    for i in envs:
        skill = session.actions[actions[i]].skill
        assert skill is not None
        out.infos[i]["skill"] = skill.name
        error = executor.start(i, skill, session.backend.spec.name, names)
        if error:
            skill_failed(session, i, error, skill, out)
        else:
            active.append(i)
    k = 0
    while active and k < session.skill_max_steps:
        if should_stop is not None and should_stop():
            break
        results = executor.advance({i: session.slots[i].perception() for i in active})
        still: list[int] = []
        for i in active:
            result = results.get(i, {"error": {"type": "WorkerCrashed", "message": "no result", "line": 0}})
            skill = session.actions[actions[i]].skill
            if "action" in result:
                if not session.frame(i, session.primitive_index[result["action"]], result["action"], out):
                    still.append(i)
            elif "done" in result:
                out.infos[i]["skill_finished"] = True
                metrics.ENV_SKILL_RUNS.labels("finished").inc()
                if out.frames[i] == 0:  # every action consumes a frame, so time always moves on
                    # Named for what happened: a policy without `noop` must not read as full of noops.
                    name = f"{SKILL_PREFIX}{skill.name if skill else '?'} (returned without acting)"
                    session.frame(i, session.backend.spec.noop_action, name, out)
            else:
                skill_failed(session, i, result["error"], skill, out)
        active = still
        k += 1
    if active:
        outcome = "step_cap" if k >= session.skill_max_steps else "stopped"
        metrics.ENV_SKILL_RUNS.labels(outcome).inc(len(active))
    executor.stop(active)


def skill_failed(session: Session, i: int, error: dict[str, Any], skill: SkillRecord | None,
                 out: StepOutcome) -> None:
    """Reports env ``i``'s skill error (with its source line) and, when it used no frame, spends one."""
    if skill is not None and error.get("line") and not error.get("code_line"):
        lines = skill.code.splitlines()
        if 0 < error["line"] <= len(lines):
            error["code_line"] = lines[error["line"] - 1].strip()
    out.infos[i]["skill_error"] = error
    session.slots[i].episode.error = error
    metrics.ENV_SKILL_RUNS.labels("error").inc()
    metrics.ENV_SKILL_ERRORS.labels(error.get("type", "unknown")).inc()
    if out.frames[i] == 0:
        name = f"{SKILL_PREFIX}{skill.name if skill else '?'} (failed: {error.get('type', 'error')})"
        session.frame(i, session.backend.spec.noop_action, name, out)
