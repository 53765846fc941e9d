"""An agent's answer as the planner's and the learner's protos, and those protos back in the answer's own form (what a
revision prompt shows the agent that wrote it)."""

from __future__ import annotations

import enum
import re
from typing import Any

from pydantic import BaseModel

from rlgpt.reward_kinds import takes_target
from rlgpt.v1 import common_pb2, learner_pb2, planner_pb2
from services.planner.schemas import MIN_ENV_FRAMES, MacroActionAnswer


def value_of(x: Any) -> Any:
    """A schema's enum member as its plain value (anything else as it is)."""
    return x.value if isinstance(x, enum.Enum) else x


def plan_to_proto(answer: BaseModel, iteration: int) -> planner_pb2.Plan:
    subtasks = []
    seen: dict[str, int] = {}
    for st in answer.subtasks:
        conditions = []
        for c in st.success:
            if c.achievement is not None:
                conditions.append(common_pb2.Condition(achievement=value_of(c.achievement)))
            else:
                conditions.append(common_pb2.Condition(inventory=common_pb2.ItemCount(item=value_of(c.item),
                                                                                      count=c.count or 1)))
        # Sub-tasks are keyed by name: a repeated name (a copied example) gets a suffix instead of merging.
        seen[st.name] = seen.get(st.name, 0) + 1
        name = st.name if seen[st.name] == 1 else f"{st.name[:44]}_{seen[st.name]}"
        subtasks.append(planner_pb2.SubTask(
            name=name, description=st.description, success=conditions,
            decision=planner_pb2.DECISION_CODE if st.decision == "code" else planner_pb2.DECISION_RL,
            skills=[value_of(s) for s in st.skills]))
    # A rationale that is the answer form's placeholder (small models copy "<why ...>") says nothing: dropped.
    rationale = "" if re.fullmatch(r"\s*<[^<>]*>\s*", answer.rationale) else answer.rationale
    return planner_pb2.Plan(subtasks=subtasks, iteration=iteration, rationale=rationale)


def training_budget(asked: int | None, offered: int) -> int:
    """The frames a training gets: what the answer asked for, within [MIN_ENV_FRAMES, ``offered``]; the whole
    offer when it asked for nothing (an offer below the minimum stays the cap)."""
    if not asked:
        return offered
    return min(offered, max(MIN_ENV_FRAMES, int(asked)))


def rl_config_to_proto(answer: BaseModel, subtask: planner_pb2.SubTask, env_frames: int,
                       seed: int) -> learner_pb2.RLConfig:
    """The answer as the learner's config; ``env_frames`` is the loop's offer, the most it trains for. The
    answer's macro actions are not in it: they must be registered first (:func:`macro_actions_of`)."""
    env_frames = training_budget(getattr(answer, "env_frames", None), env_frames)
    return learner_pb2.RLConfig(
        name=subtask.name, task=common_pb2.TaskSpec(name=subtask.name, description=subtask.description,
                                                    success=list(subtask.success),
                                                    terminate_on_success=bool(getattr(answer, "end_on_success",
                                                                                      False))),
        observe=list(dict.fromkeys(value_of(o) for o in getattr(answer, "observe", None) or [])),
        primitive_actions=list(dict.fromkeys(value_of(a) for a in answer.primitive_actions)),
        skills=list(dict.fromkeys(value_of(s) for s in answer.skills)), skill_max_steps=answer.skill_max_steps,
        # Only some kinds take a target (rlgpt.reward_kinds); a model's stray target elsewhere is dropped.
        reward_terms=[common_pb2.RewardTerm(kind=value_of(t.kind), weight=t.weight,
                                            target=value_of(t.target) if takes_target(value_of(t.kind)) else "")
                      for t in answer.reward_terms],
        episode_length=answer.episode_length, env_frames=env_frames, seed=seed)


def condition_answer(condition: common_pb2.Condition) -> dict[str, Any]:
    if condition.WhichOneof("kind") == "inventory":
        return {"item": condition.inventory.item, "count": condition.inventory.count}
    return {"achievement": condition.achievement}


def plan_answer(plan: planner_pb2.Plan) -> dict[str, Any]:
    """A plan in the slow agent's own answer form (the inverse of :func:`plan_to_proto`)."""
    return {"rationale": plan.rationale, "subtasks": [
        {"name": st.name, "description": st.description, "success": [condition_answer(c) for c in st.success],
         "decision": "rl" if st.decision == planner_pb2.DECISION_RL else "code", "skills": list(st.skills)}
        for st in plan.subtasks]}


def macro_actions_of(answer: BaseModel) -> list[MacroActionAnswer]:
    """The macro actions an RL answer wrote (none for an answer of a schema without them)."""
    return list(getattr(answer, "macro_actions", None) or [])


def macro_skill_name(subtask: str, name: str, taken: set[str] | tuple[str, ...] = ()) -> str:
    """The registered name of sub-task ``subtask``'s macro action ``name``: ``<subtask>__<name>``, cut to the env
    server's 64 characters (``[a-z][a-z0-9_]{0,63}``, the sub-task's part shortened first), and kept apart from
    the names in ``taken`` with a numeric suffix."""
    macro = name[:30].rstrip("_") or "macro"
    candidate, n = "", 1
    while not candidate or candidate in taken:
        tail = macro if n == 1 else f"{macro[:27].rstrip('_')}_{n}"
        candidate = f"{subtask[:64 - 2 - len(tail)]}__{tail}"
        n += 1
    return candidate


def macro_short_name(subtask: str, registered: str) -> str:
    """The name the model wrote for a macro action registered as ``registered`` (the inverse, as far as the
    registered name keeps it)."""
    head, sep, tail = registered.rpartition("__")
    return tail if sep and subtask.startswith(head) else registered


def rl_config_answer(config: learner_pb2.RLConfig, macro_actions: dict[str, str] | None = None) -> dict[str, Any]:
    """An RL config in the fast agent's own answer form (the fields its schema has). ``macro_actions``: registered
    name -> code of the config's own macro actions; they are shown as macro actions (with the name the model
    wrote, and without their description, which is not kept), not among ``skills``."""
    macros = macro_actions or {}
    return {"primitive_actions": list(config.primitive_actions),
            "skills": [s for s in config.skills if s not in macros],
            "macro_actions": [{"name": macro_short_name(config.name, name), "code": code}
                              for name, code in macros.items() if name in config.skills],
            "skill_max_steps": config.skill_max_steps,
            "reward_terms": [{"kind": t.kind, "target": t.target, "weight": round(t.weight, 4)}
                             for t in config.reward_terms],
            "episode_length": config.episode_length, "env_frames": config.env_frames,
            "observe": list(config.observe), "end_on_success": config.task.terminate_on_success}
