"""Coded skills as macro actions: a skill action of a batched step runs its skill in the sandbox for up
to ``skill_max_steps`` frames, or until it returns, fails or the caller stops it.

The session hands itself in as a :class:`MacroSession` (what the macro actions read of it, and its one-frame
step), so this module needs nothing of session.py; session.py and prefix.py (which runs a session's prefix
through :func:`run_skills`) import this one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from rlgpt import metrics
from rlgpt.env_contract import PLAN_ACTION, SKILL_PREFIX
from services.env_server.backends.base import Backend, BackendEnv
from services.env_server.sessions.actions import Action
from services.env_server.sessions.episode import EnvSlot
from services.env_server.sessions.outcome import StepOutcome
from services.env_server.skills.executor import SkillExecutor, SkillRecord, with_code_line


@dataclasses.dataclass(frozen=True)
class PlanInterrupt:
    """When a plan action ends before its K frames (CreateSessionRequest.plan_interrupt)."""

    damage: bool = False
    """On the frame the player's health falls below what it was when the action began."""
    threat_within: int = 0
    """While one of the backend's threats is this many cells away or closer (0: off)."""

    @property
    def on(self) -> bool:
        return self.damage or self.threat_within > 0

    def reason(self, env: BackendEnv, health_at_start: float) -> str:
        """Why env's plan action ends now ("damage", "threat"), or "" when it goes on."""
        if self.damage and env.health() < health_at_start:
            return "damage"
        if self.threat_within and env.threat_distance(self.threat_within) is not None:
            return "threat"
        return ""


@dataclasses.dataclass
class PlanState:
    """Where one env's plan stands in its episode (``Session.plans``)."""

    stage: int = 0
    """The stage whose skill the plan started last."""
    overtime: int = 0
    """Frames that skill has run since its stage got done (capped by ``plan_skill_overtime``)."""
    suspended: SkillRecord | None = None
    """The plan skill left running in its sandbox slot when the last plan action ended: the next resumes it."""


class MacroSession(Protocol):
    """What the macro actions use of a session (``Session`` is one): its envs and actions, where each env's
    plan stands, and its one-frame step."""

    backend: Backend
    actions: list[Action]
    slots: list[EnvSlot]
    skill_max_steps: int
    plan_interrupt: PlanInterrupt
    plan_skill_overtime: int
    primitive_index: dict[str, int]
    plans: dict[int, PlanState]

    @property
    def num_envs(self) -> int: ...

    def frame(self, i: int, primitive: int, name: str, out: StepOutcome) -> bool:
        """One primitive frame of env ``i`` into ``out``; True when its episode ended."""
        ...


def plan_stage(session: MacroSession, i: int) -> int | None:
    """Env ``i``'s first stage not yet done in its episode (stages are sticky); None when all are."""
    return next((j for j, done in enumerate(session.slots[i].episode.stages_done) if not done), None)


def run_skills(session: MacroSession, executor: SkillExecutor, envs: list[int], actions: list[int], out: StepOutcome,
               should_stop: Callable[[], bool] | None) -> None:
    """Runs the skill and plan actions of ``envs`` together, one frame of each per round, into ``out``.

    A skill action runs its skill from the start for up to K frames (``skill_max_steps``), or until it returns or
    fails. A plan action runs the plan's skills, each until it returns: the first unfinished stage's skill; when
    it returns with its stage done, the next stage's skill within the same K frames. A plan skill that fails, or
    returns with its stage not done, ends the plan action (``plan_error`` / ``skill_finished``); the next plan
    action starts that stage's skill again. A plan skill still running when the action ends (after K frames, or
    early when the session's ``plan_interrupt`` says so after a frame: hurt, a threat near) is suspended, not
    stopped (``PlanState.suspended``): the next plan action resumes it with its locals and its agent's memory of
    the map (restarting it every K frames cost the recorded diamond chain most of its successes), even if its
    stage got done meanwhile, since the skill says when it is done. A resumed skill that fails or returns before
    it acted again is followed within the same action as the next plan action would follow it. So K and
    interrupts change when the policy may act, never what the plan does: a chain alone plays the same at any K,
    with or without interrupts. A skill that goes on ``plan_skill_overtime`` frames past its done stage is
    stopped and the plan moves on (one that never returns must not hold the plan for good). Plan skills live in
    a sandbox slot of their own (:func:`plan_slot`), so a skill action in between runs beside the suspended plan
    skill and leaves it as it was. A stage the client plays (no skill: a trained policy) ends the plan action where
    it is the first unfinished one; a suspended skill is stopped, not resumed, once the plan got past such a
    stage."""
    names = list(session.backend.spec.actions)
    backend = session.backend.spec.name
    k_frames = session.skill_max_steps
    running: dict[int, SkillRecord] = {}
    plans: dict[int, tuple[SkillRecord | None, ...]] = {}
    states = session.plans
    interrupt = session.plan_interrupt
    health_at_start: dict[int, float] = {}
    resumed: set[int] = set()  # envs whose resumed plan skill has not acted yet in this action

    def slot(i: int) -> int:
        return plan_slot(session, i) if i in plans else i

    def start(i: int, skill: SkillRecord) -> None:
        out.infos[i]["skill"] = skill.name
        error = executor.start(slot(i), skill, backend, names, session.slots[i].env.remembered())
        if error:
            failed(i, error, skill)
        else:
            running[i] = skill

    def failed(i: int, error: dict[str, Any], skill: SkillRecord) -> None:
        if i in plans:
            plan_failed(session, i, error, skill, out)
        else:
            skill_failed(session, i, error, skill, out)

    def plan_next(i: int, still: dict[int, SkillRecord]) -> None:
        """Env ``i``'s plan goes on within this action with the first unfinished stage's skill, from the next
        round; with every stage done, time moves on by a frame; at a stage the client plays, the action ends (after
        a frame, if it took none)."""
        stage = plan_stage(session, i)
        following = None if stage is None else plans[i][stage]
        if stage is None:
            out.infos[i]["skill"] = PLAN_ACTION
            session.frame(i, session.backend.spec.noop_action, f"{PLAN_ACTION} (every stage done)", out)
            return
        if following is None:
            if out.frames[i] == 0:  # every action consumes a frame, so time always moves on
                out.infos[i]["skill"] = PLAN_ACTION
                session.frame(i, session.backend.spec.noop_action, f"{PLAN_ACTION} (stage {stage} is the client's)",
                              out)
            return
        states[i] = PlanState(stage=stage)
        start(i, following)
        if running.get(i) is following:
            still[i] = following

    def overtime(i: int) -> bool:
        """Whether env ``i``'s plan skill has gone on past its done stage for as long as the server allows: the
        plan then moves on without it (a skill that never returns must not hold the plan for good)."""
        state = states[i]
        if not session.slots[i].episode.stages_done[state.stage]:
            return False
        state.overtime += 1
        return state.overtime >= session.plan_skill_overtime

    for i in envs:
        action = session.actions[actions[i]]
        if action.skill is not None:
            start(i, action.skill)
            continue
        plans[i] = action.plan
        if interrupt.on:
            health_at_start[i] = session.slots[i].env.health()
        suspended = states[i].suspended if i in states else None
        if suspended is not None:
            states[i].suspended = None
            if past_client_stage(action.plan, states[i].stage, plan_stage(session, i)):
                executor.stop([plan_slot(session, i)])  # the client played a later stage: the plan is past it
                suspended = None
        if suspended is not None:  # the skill the last plan action left goes on
            out.infos[i]["skill"] = suspended.name
            running[i] = suspended
            resumed.add(i)
        else:
            plan_next(i, running)

    capped: dict[int, SkillRecord] = {}
    ended: list[int] = []  # envs whose episode ended during their skill: its slot is cleared
    while running:
        if should_stop is not None and should_stop():
            break
        results = executor.advance({slot(i): session.slots[i].perception() for i in running})
        still: dict[int, SkillRecord] = {}
        for i, skill in running.items():
            result = results.get(slot(i), {"error": {"type": "WorkerCrashed", "message": "no result", "line": 0}})
            first = i in resumed
            resumed.discard(i)
            if "action" in result:
                if session.frame(i, session.primitive_index[result["action"]], result["action"], out):
                    ended.append(slot(i))
                    continue
                if i in plans and overtime(i):
                    metrics.ENV_SKILL_RUNS.labels("overtime").inc()
                    if out.frames[i] < k_frames:
                        plan_next(i, still)
                    else:  # the next plan action starts the next stage's skill
                        executor.stop([slot(i)])
                elif out.frames[i] >= k_frames:
                    capped[i] = skill
                elif i in health_at_start and (reason := interrupt.reason(session.slots[i].env, health_at_start[i])):
                    # suspended as at K: the next plan action resumes it
                    out.infos[i]["plan_interrupted"] = reason
                    states[i].suspended = skill
                else:
                    still[i] = skill
            elif "done" in result:
                metrics.ENV_SKILL_RUNS.labels("finished").inc()
                if i in plans and (first or (session.slots[i].episode.stages_done[states[i].stage]
                                             and plan_stage(session, i) is not None)):
                    # Its stage done, the plan goes on within this action; a resumed skill that returned before
                    # acting again is followed as the next plan action would follow it (no frame in between).
                    plan_next(i, still)
                else:
                    out.infos[i]["skill_finished"] = True
                    if out.frames[i] == 0:  # every action consumes a frame, so time always moves on
                        # Named for what happened: a policy without `noop` must not read as full of noops.
                        name = f"{SKILL_PREFIX}{skill.name} (returned without acting)"
                        session.frame(i, session.backend.spec.noop_action, name, out)
            elif first:  # a resumed skill's error before it acted again: reported, and the plan starts afresh
                plan_failed(session, i, result["error"], skill, out, spend_frame=False)
                plan_next(i, still)
            else:
                failed(i, result["error"], skill)
        running = still
    left = {**capped, **running}
    for i, skill in left.items():
        if i in plans:
            states[i].suspended = skill
    # A plan skill suspended at K (or by an interrupt) goes on in the next plan action: not a run that ended.
    if stopped := [i for i in left if i not in plans]:
        metrics.ENV_SKILL_RUNS.labels("step_cap").inc(sum(i in capped for i in stopped))
        metrics.ENV_SKILL_RUNS.labels("stopped").inc(sum(i in running for i in stopped))
    executor.stop(stopped + ended)


def past_client_stage(plan: tuple[SkillRecord | None, ...], stage: int, first_unfinished: int | None) -> bool:
    """Whether a stage the client plays (None) lies after ``stage`` and before the first unfinished one: the plan
    got past it since ``stage``'s skill was suspended."""
    end = len(plan) if first_unfinished is None else first_unfinished
    return any(plan[j] is None for j in range(stage + 1, end))


def plan_slot(session: MacroSession, i: int) -> int:
    """Env ``i``'s sandbox slot for plan skills (its skill actions use slot ``i``)."""
    return session.num_envs + i


def plan_failed(session: MacroSession, i: int, error: dict[str, Any], skill: SkillRecord, out: StepOutcome,
                spend_frame: bool = True) -> None:
    """A plan skill's error ends the plan action only: the world may have made it fail (a zombie, an item
    used up), and the policy may mend that; the error is reported, naming the skill, and counted."""
    with_code_line(error, skill.code if skill else "")
    out.infos[i]["plan_error"] = {**error, "message": f"plan skill {skill.name}: {error.get('message', '')}"}
    metrics.ENV_SKILL_RUNS.labels("error").inc()
    metrics.ENV_SKILL_ERRORS.labels(error.get("type", "unknown")).inc()
    if out.frames[i] == 0 and spend_frame:
        name = f"{PLAN_ACTION}: {skill.name} (failed: {error.get('type', 'error')})"
        session.frame(i, session.backend.spec.noop_action, name, out)


def skill_failed(session: MacroSession, i: int, error: dict[str, Any], skill: SkillRecord | None,
                 out: StepOutcome) -> None:
    """Reports env ``i``'s skill error (with its source line) and, when it used no frame, spends one."""
    with_code_line(error, skill.code if skill else "")
    out.infos[i]["skill_error"] = error
    session.slots[i].episode.error = error
    metrics.ENV_SKILL_RUNS.labels("error").inc()
    metrics.ENV_SKILL_ERRORS.labels(error.get("type", "unknown")).inc()
    if out.frames[i] == 0:
        name = f"{SKILL_PREFIX}{skill.name if skill else '?'} (failed: {error.get('type', 'error')})"
        session.frame(i, session.backend.spec.noop_action, name, out)
