"""The fast agent's part in RL around a kept plan (:mod:`services.planner.kept_plan`): what it reads (the plan,
and how and where the chain's failed episodes ended), what it answers (primitives, macro actions, K, reward terms)
and that answer applied to the training's config. The planner's own terms (the plan's stages and the task's
success) are always paid; the agent adds what the chain fails at."""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Collection
from typing import Any

from pydantic import BaseModel

from rlgpt.env_contract import PLAN_ACTION
from rlgpt.llm.client import CallRecord
from rlgpt.prompts import conditions_text
from rlgpt.v1 import common_pb2, learner_pb2, planner_pb2
from services.planner.agents.fast import AGENT, FastAgent
from services.planner.agents.texts import reward_kinds_text, shown_macros, skill_api_text
from services.planner.answer_forms import value_of
from services.planner.prompts import render
from services.planner.schemas import (
    CODE_LIMIT,
    KEPT_PLAN_OWN_KINDS,
    SKILL_CODE_LIMITS,
    MacroActionAnswer,
    kept_plan_schema,
)

MAX_FAILURE_LINES = 40
"""Lines of failed chain episodes' trajectories shown (their last lines, a few episodes)."""
MAX_SHOWN_REVISED_CHARS = 16_000
"""A revision shows the previous macro actions' code, each whole (up to the schema's limit) while all fit in
this: the kept plan's prompt is long already, and its fast agent a capable model's job."""
_ENDS = {"death": "died", "time_limit": "ran out of frames", "skill_finished": "ended with the chain's skills all "
         "returned", "error": "ended in a skill error"}


@dataclasses.dataclass
class KeptPlanAnswer:
    """The fast agent's answer: what the policy may do besides the plan action, and what it is paid for."""

    primitive_actions: list[str]
    macro_actions: list[MacroActionAnswer]
    skill_max_steps: int
    reward_terms: list[common_pb2.RewardTerm]
    record: CallRecord | None
    plan_interrupt: common_pb2.PlanInterrupt = dataclasses.field(default_factory=common_pb2.PlanInterrupt)
    """When a plan action hands control back before its K frames (hurt, a threat near)."""


@dataclasses.dataclass(frozen=True)
class KeptPlanRevision:
    """What a revision of the fast agent's config reads besides the first prompt's: the config it revises and how
    that config did."""

    previous: dict[str, Any]
    """The previous answer in its own form (``kept_plan_schema``'s fields), its macro actions' code included."""
    outcome: str
    """How the previous config did, in words: its training, the policy against the chain alone on the same
    worlds, any probe of its macro actions (the caller's measurements; never worlds the result is scored on)."""


def revision_text(revision: KeptPlanRevision | None) -> str:
    """The prompt's revision part ('' for a first config): the previous answer, its macro actions' code shown as
    an RL revision shows it (:func:`~services.planner.agents.texts.shown_macros`), and its outcome."""
    if revision is None:
        return ""
    previous = dict(revision.previous)
    written = list(previous.get("macro_actions", []))
    shown = shown_macros({str(m.get("name", "")): str(m.get("code", "")) for m in written},
                         each=int(SKILL_CODE_LIMITS["max_length"]), total=MAX_SHOWN_REVISED_CHARS)
    previous["macro_actions"] = [{**m, "code": shown[str(m.get("name", ""))]} for m in written]
    return "\n" + render("fast_agent_kept_plan_revision", previous_config=json.dumps(previous, indent=1),
                         outcome=revision.outcome.strip())


def _holds(conditions: list[common_pb2.Condition], achievements: set[str], inventory: dict[str, int]) -> bool:
    return bool(conditions) and all(
        c.achievement in achievements if c.WhichOneof("kind") == "achievement"
        else inventory.get(c.inventory.item, 0) >= c.inventory.count for c in conditions)


def stages_done(plan: planner_pb2.Plan, episode: dict[str, Any]) -> list[bool]:
    """Per sub-task, whether a chain episode (as its record keeps it) had done it by its end: every sub-task up to
    the last whose conditions held (what a later sub-task used up does not undo it)."""
    achievements, inventory = set(episode.get("achievements", [])), dict(episode.get("inventory", {}))
    done = [i for i, st in enumerate(plan.subtasks) if _holds(list(st.success), achievements, inventory)]
    last = max(done, default=-1)
    return [i <= last for i in range(len(plan.subtasks))]


def stage_ended(plan: planner_pb2.Plan, episode: dict[str, Any]) -> str:
    """The sub-task a failed chain episode ended in: the first not done by its end (:func:`stages_done`); the last
    when all were."""
    done = stages_done(plan, episode)
    return plan.subtasks[done.index(False) if False in done else len(done) - 1].name


def _ending(episodes: list[dict[str, Any]]) -> str:
    reasons = collections.Counter(e.get("end_reason", "") for e in episodes)
    parts = []
    for reason, n in reasons.most_common():
        words = f"{n} {_ENDS.get(reason, reason or 'ended for an unknown reason')}"
        if reason == "death":
            causes = collections.Counter(e.get("death_cause") or "unknown" for e in episodes
                                         if e.get("end_reason") == "death")
            words += " (" + ", ".join(f"{cause}: {k}" for cause, k in causes.most_common()) + ")"
        parts.append(words)
    return "; ".join(parts)


def failures_text(plan: planner_pb2.Plan, success_rate: float, failed: list[dict[str, Any]]) -> str:
    """How the chain's evaluation went, in words: its success, where its failed episodes ended (sub-task, how,
    death causes) and the last lines of a few of their trajectories."""
    lines = [f"The chain succeeded in {success_rate:.0%} of its evaluation episodes; {len(failed)} failed."]
    by_stage: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for episode in failed:
        by_stage[stage_ended(plan, episode)].append(episode)
    for st in plan.subtasks:
        if st.name in by_stage:
            episodes = by_stage[st.name]
            lines.append(f"- {len(episodes)} ended before {st.name} was done: {_ending(episodes)}")
    tails = [e for e in failed if e.get("tail")]
    if tails:
        lines.append("The last lines of some failed episodes (step N at (x, y): what happened):")
        shown = 0
        for episode in tails:
            if shown >= MAX_FAILURE_LINES:
                break
            tail = episode["tail"][-(MAX_FAILURE_LINES - shown):]
            lines.append(f"episode ending before {stage_ended(plan, episode)} was done, {episode.get('steps', 0)} "
                         "frames:")
            lines += [f"  {line}" for line in tail]
            shown += len(tail)
    return "\n".join(lines)


def plan_text(plan: planner_pb2.Plan) -> str:
    """The plan's sub-tasks in order; those whose decision is RL are done by their trained policy."""
    return "\n".join(f"{i}. {st.name}: {st.description} (done when: {conditions_text(list(st.success))}"
                     + ("; done by its policy trained by RL" if st.decision == planner_pb2.DECISION_RL else "") + ")"
                     for i, st in enumerate(plan.subtasks, 1))


def hand_back_text(describe: Any) -> str:
    """The prompt's lines on handing control back early: what can hurt the player comes from Describe."""
    lines = [f"- `hand_back_when_hurt` (true or false): the `{PLAN_ACTION}` action also ends, its skill paused, on "
             "the frame the player loses health."]
    if describe.threats:
        lines.append(f"- `hand_back_within` (0 to {describe.limits.max_threat_distance}; 0: off): the `{PLAN_ACTION}` "
                     f"action also ends, its skill paused, while one of {', '.join(describe.threats)} is this many "
                     "cells away or closer (counting the larger of the two axis distances): while one is that close, "
                     f"a `{PLAN_ACTION}` action runs one frame and the policy chooses again.")
    return "\n".join(lines)


def kept_plan_prompt(fast: FastAgent, task: common_pb2.TaskSpec, plan: planner_pb2.Plan, *, success_rate: float,
                     failed: list[dict[str, Any]], env_frames: int, own_reward: str,
                     revision: KeptPlanRevision | None = None) -> tuple[str, type[BaseModel]]:
    """The prompt and its answer schema (primitives and reward kinds from Describe); with ``revision``, the
    config it revises and how that did."""
    describe = fast.describe
    prompt = render("fast_agent_kept_plan", task=task.name, success=conditions_text(list(task.success)),
                    code_limit=CODE_LIMIT,
                    plan=plan_text(plan), failures=failures_text(plan, success_rate, failed),
                    plan_action=PLAN_ACTION, own_reward=own_reward,
                    reward_kinds=reward_kinds_text(describe, leave_out=KEPT_PLAN_OWN_KINDS),
                    protocol=fast.protocol.kept_plan_test(env_frames), skill_api=skill_api_text(describe),
                    hand_back=hand_back_text(describe),
                    hand_back_field=', "hand_back_within": ...' if describe.threats else "",
                    revision=revision_text(revision))
    return prompt, kept_plan_schema(describe)


def write_kept_plan(fast: FastAgent, task: common_pb2.TaskSpec, plan: planner_pb2.Plan, *, success_rate: float,
                    failed: list[dict[str, Any]], env_frames: int, own_reward: str,
                    iteration: int = 0, revision: KeptPlanRevision | None = None) -> KeptPlanAnswer:
    """The fast agent's answer (one LLM call; StructuredOutputError when it gives none that fits); with
    ``revision``, a revision of its previous one."""
    prompt, schema = kept_plan_prompt(fast, task, plan, success_rate=success_rate, failed=failed,
                                      env_frames=env_frames, own_reward=own_reward, revision=revision)
    answer, record = fast.llm.complete(AGENT, [{"role": "user", "content": prompt}], schema, iteration=iteration)
    return kept_plan_answer(answer, record)


def kept_plan_answer(answer: BaseModel, record: CallRecord | None = None, *,
                     hurt: bool = False) -> KeptPlanAnswer:
    """An answer of :func:`~services.planner.schemas.kept_plan_schema` as plain values (terms of weight 0, which
    pay nothing, and repeated primitives left out); ``hurt``: whether the plan action hands back when the player is
    hurt where the answer does not say."""
    said = "hand_back_when_hurt" in answer.model_fields_set
    return KeptPlanAnswer(
        primitive_actions=list(dict.fromkeys(value_of(a) for a in answer.primitive_actions)),
        macro_actions=list(answer.macro_actions), skill_max_steps=int(answer.skill_max_steps),
        reward_terms=[common_pb2.RewardTerm(kind=value_of(t.kind), target=value_of(t.target), weight=float(t.weight))
                      for t in answer.reward_terms if t.weight != 0],
        record=record,
        plan_interrupt=common_pb2.PlanInterrupt(damage=bool(answer.hand_back_when_hurt) if said else hurt,
                                                threat_within=int(getattr(answer, "hand_back_within", 0) or 0)))


def answer_form(answer: KeptPlanAnswer) -> dict[str, Any]:
    """An answer in the form the fast agent wrote it (what a revision shows it), macro actions' code included."""
    return {"primitive_actions": list(answer.primitive_actions),
            "macro_actions": [m.model_dump() for m in answer.macro_actions],
            "skill_max_steps": answer.skill_max_steps,
            "reward_terms": [{"kind": t.kind, "target": t.target or None, "weight": t.weight}
                             for t in answer.reward_terms],
            "hand_back_when_hurt": answer.plan_interrupt.damage,
            "hand_back_within": answer.plan_interrupt.threat_within}


def answer_of(form: dict[str, Any]) -> KeptPlanAnswer:
    """An answer again from its :func:`answer_form` (as a run's state keeps it), without its call's record."""
    return KeptPlanAnswer(
        primitive_actions=list(form["primitive_actions"]),
        macro_actions=[MacroActionAnswer.model_validate(m) for m in form["macro_actions"]],
        skill_max_steps=int(form["skill_max_steps"]),
        reward_terms=[common_pb2.RewardTerm(kind=t["kind"], target=t["target"] or "", weight=float(t["weight"]))
                      for t in form["reward_terms"]],
        record=None, plan_interrupt=common_pb2.PlanInterrupt(damage=bool(form["hand_back_when_hurt"]),
                                                            threat_within=int(form["hand_back_within"])))


def apply_answer(config: learner_pb2.RLConfig, answer: KeptPlanAnswer, macro_skills: list[str],
                 own_kinds: Collection[str] = KEPT_PLAN_OWN_KINDS) -> None:
    """The answer in the training's config: its primitives, its accepted macro actions (registered names), its K,
    and its reward terms after the planner's own (the config's terms of ``own_kinds``; the rest were defaults)."""
    del config.primitive_actions[:]
    config.primitive_actions.extend(answer.primitive_actions)
    del config.skills[:]
    config.skills.extend(macro_skills)
    config.skill_max_steps = answer.skill_max_steps
    own = [t for t in config.reward_terms if t.kind in own_kinds]
    del config.reward_terms[:]
    config.reward_terms.extend([*own, *answer.reward_terms])
    config.plan_interrupt.CopyFrom(answer.plan_interrupt)
