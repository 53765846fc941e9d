"""The agents' answer types, built per env from its vocabulary.

Names the env knows (achievements, items, actions, skills) become enums in the JSON schema, so a
server with constrained decoding (llama.cpp, vLLM) can only produce valid names, and pydantic
rejects invalid ones from servers without it.
"""

from __future__ import annotations

import enum
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, create_model, model_validator

from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2

MAX_SUBTASKS = 12
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,47}$"
REWARD_KINDS = ("success", "achievement", "inventory_gain", "step", "health", "death", "native")
_TARGETED = ("achievement", "inventory_gain")


class SkillAnswer(BaseModel):
    """The fast agent's coded skill."""

    name: str = Field(pattern=NAME_PATTERN, description="snake_case skill name")
    description: str = Field(max_length=400, description="what the skill does, one sentence")
    code: str = Field(min_length=10, max_length=8000,
                      description="Python source: def skill(agent): ... yield '<action>'")


def _clamped(kind: type, low: float, high: float) -> Any:
    """A number forced into [low, high]: a small model's out-of-range value is corrected, not fatal."""

    def clamp(value: Any) -> Any:
        try:
            return min(max(kind(value), kind(low)), kind(high))
        except (TypeError, ValueError):
            return value  # not a number: let validation report it

    return Annotated[kind, BeforeValidator(clamp)]


def _enum(name: str, values: tuple[str, ...]) -> Any:
    """A closed set of names; JSON schema ``enum`` (``name`` documents the call site)."""
    return Literal[values]  # type: ignore[valid-type]


@lru_cache(maxsize=32)
def _plan_models(achievements: tuple[str, ...], items: tuple[str, ...], skills: tuple[str, ...]) -> tuple[Any, Any]:
    achievement_enum = _enum("Achievement", achievements)
    item_enum = _enum("Item", items)

    class Condition(BaseModel):
        """A success condition: an achievement, or at least `count` of an inventory item."""

        achievement: achievement_enum | None = None  # type: ignore[valid-type]
        item: item_enum | None = None  # type: ignore[valid-type]
        count: int | None = Field(default=None, ge=1, le=9)

        @model_validator(mode="after")
        def one_kind(self) -> Condition:
            if (self.achievement is None) == (self.item is None):
                raise ValueError("a condition names exactly one of `achievement` or `item` (with `count`)")
            return self

    skill_type: Any = _enum("Skill", skills) if skills else str
    subtask = create_model(
        "SubTask",
        name=(str, Field(pattern=NAME_PATTERN)),
        description=(str, Field(max_length=400)),
        success=(list[Condition], Field(min_length=1, max_length=4)),
        decision=(Literal["code", "rl"], ...),
        skills=(list[skill_type], Field(default_factory=list, max_length=6)),
    )
    plan = create_model(
        "Plan",
        rationale=(str, Field(max_length=1200)),
        subtasks=(list[subtask], Field(min_length=1, max_length=MAX_SUBTASKS)),
    )
    return plan, Condition


def plan_schema(describe: env_pb2.DescribeResponse, skills: tuple[str, ...]) -> type[BaseModel]:
    return _plan_models(tuple(describe.achievements), tuple(describe.items), tuple(sorted(skills)))[0]


@lru_cache(maxsize=32)
def _rl_model(actions: tuple[str, ...], skills: tuple[str, ...], targets: tuple[str, ...]) -> type[BaseModel]:
    skill_type: Any = _enum("Skill", skills) if skills else str
    term = create_model(
        "RewardTerm",
        kind=(_enum("RewardKind", REWARD_KINDS), ...),
        target=(_enum("Target", ("", "*", *targets)), ""),
        weight=(_clamped(float, -10, 10), ...),
    )
    return create_model(
        "RLConfig",
        primitive_actions=(list[_enum("Action", actions)], Field(min_length=1, max_length=len(actions))),
        skills=(list[skill_type], Field(default_factory=list, max_length=6)),
        skill_max_steps=(_clamped(int, 1, 200), ...),
        reward_terms=(list[term], Field(min_length=1, max_length=8)),
        episode_length=(_clamped(int, 50, 5000), ...),
    )


def rl_schema(describe: env_pb2.DescribeResponse, skills: tuple[str, ...]) -> type[BaseModel]:
    targets = tuple(dict.fromkeys((*describe.achievements, *describe.items)))
    return _rl_model(tuple(describe.actions), tuple(sorted(skills)), targets)


def _value(x: Any) -> Any:
    return x.value if isinstance(x, enum.Enum) else x


def plan_to_proto(answer: BaseModel, iteration: int) -> planner_pb2.Plan:
    subtasks = []
    for st in answer.subtasks:
        conditions = []
        for c in st.success:
            if c.achievement is not None:
                conditions.append(common_pb2.Condition(achievement=_value(c.achievement)))
            else:
                conditions.append(common_pb2.Condition(inventory=common_pb2.ItemCount(item=_value(c.item),
                                                                                      count=c.count or 1)))
        subtasks.append(planner_pb2.SubTask(
            name=st.name, description=st.description, success=conditions,
            decision=planner_pb2.DECISION_CODE if st.decision == "code" else planner_pb2.DECISION_RL,
            skills=[_value(s) for s in st.skills]))
    return planner_pb2.Plan(subtasks=subtasks, iteration=iteration, rationale=answer.rationale)


def rl_config_to_proto(answer: BaseModel, subtask: planner_pb2.SubTask, env_frames: int,
                       seed: int) -> learner_pb2.RLConfig:
    return learner_pb2.RLConfig(
        name=subtask.name, task=common_pb2.TaskSpec(name=subtask.name, description=subtask.description,
                                                    success=list(subtask.success)),
        primitive_actions=list(dict.fromkeys(_value(a) for a in answer.primitive_actions)),
        skills=list(dict.fromkeys(_value(s) for s in answer.skills)), skill_max_steps=answer.skill_max_steps,
        # Only achievement and inventory_gain take a target; a model's stray target elsewhere is dropped.
        reward_terms=[common_pb2.RewardTerm(kind=_value(t.kind), weight=t.weight,
                                            target=_value(t.target) if _value(t.kind) in _TARGETED else "")
                      for t in answer.reward_terms],
        episode_length=answer.episode_length, env_frames=env_frames, seed=seed)


_MOVES = ("move_left", "move_right", "move_up", "move_down")
_INTERACTIONS = ("collect_", "eat_", "defeat_")


def complete_action_space(config: learner_pb2.RLConfig, actions: list[str]) -> list[str]:
    """Adds the primitive actions without which the config's own success condition cannot be reached.

    Weak models leave out the one action a sub-task needs (``make_wood_pickaxe`` without the
    ``make_wood_pickaxe`` action) or every move; training such a space wastes its whole budget. An achievement
    that is an action name needs that action; collect/eat/defeat achievements and items need ``do``; an item
    made or placed needs its make_/place_ action; the agent must be able to move. Returns what was added.
    """
    if not config.primitive_actions:
        return []  # empty means all actions
    needed: list[str] = [a for a in _MOVES if a in actions]
    for condition in config.task.success:
        if condition.HasField("inventory"):
            item = condition.inventory.item
            needed += [a for a in (f"make_{item}", f"place_{item}") if a in actions] or ["do"]
        elif condition.achievement in actions:
            needed.append(condition.achievement)
        elif condition.achievement.startswith(_INTERACTIONS):
            needed.append("do")
    added = [a for a in dict.fromkeys(needed) if a in actions and a not in config.primitive_actions]
    config.primitive_actions.extend(added)
    return added
