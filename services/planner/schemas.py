"""The agents' answer types (pydantic models and the JSON schemas built from them), per env from its vocabulary.

Names the env knows (achievements, items, actions, skills) become enums in the JSON schema, so a
server with constrained decoding (llama.cpp, vLLM) can only produce valid names, and pydantic
rejects invalid ones from servers without it. An answer becomes a proto in :mod:`services.planner.answer_forms`;
the actions and reward an RL answer left out are completed in :mod:`services.planner.action_space`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, create_model, model_validator

from rlgpt.observation_choice import choices
from rlgpt.reward_kinds import offered
from rlgpt.v1 import env_pb2

MAX_SUBTASKS = 12
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,47}$"


def snake_name(value: Any) -> Any:
    """A name forced into NAME_PATTERN ("<Get Sand>" -> "get_sand"): a small model's stray characters are
    corrected, not fatal; what cannot become a name is left for validation to report."""
    if not isinstance(value, str):
        return value
    name = re.sub(r"[^a-z0-9]+", "_", value.lower()).strip("_")
    name = re.sub(r"^[0-9_]+", "", name)[:48].rstrip("_")
    return name or value


# The pattern before the validator: so it is in the JSON schema the server gets (a grammar enforces it), and
# still checked after snake_name ran.
SnakeName = Annotated[str, Field(pattern=NAME_PATTERN), BeforeValidator(snake_name)]


SKILL_CODE_LIMITS = {"min_length": 10, "max_length": 8000}
"""A coded skill's source, as long as the fast agent may write it (skills and macro actions alike)."""
CODE_LIMIT = f"{SKILL_CODE_LIMITS['max_length']:,}"
"""The longest code an answer may hold, as the prompts state it (a capable model writes longer code unless told)."""
MAX_MACRO_ACTIONS = 3
"""Macro actions one RL config may write for its sub-task."""
MIN_ENV_FRAMES = 2000
"""The fewest frames an RL answer may ask to train for (``env_frames``); the loop's offer stays the cap."""
MAX_ASKED_FRAMES = 10**9


class SkillAnswer(BaseModel):
    """The fast agent's coded skill."""

    name: SnakeName = Field(description="snake_case skill name")
    description: str = Field(max_length=400, description="what the skill does, one sentence")
    code: str = Field(**SKILL_CODE_LIMITS, description="Python source: def skill(agent): ... yield '<action>'")


class MacroActionAnswer(BaseModel):
    """A coded action the fast agent writes for one RL sub-task's action space (RL-GPT's key mechanism): a short
    reusable behaviour the policy calls as one action, registered as ``<sub-task>__<name>``."""

    name: SnakeName = Field(description="snake_case name of the macro action")
    description: str = Field(default="", max_length=300, description="what one call does, one sentence")
    code: str = Field(**SKILL_CODE_LIMITS, description="Python source: def skill(agent): ... yield '<action>'")


def clamped(kind: type, low: float, high: float) -> Any:
    """A number forced into [low, high]: a small model's out-of-range value is corrected, not fatal."""

    def clamp(value: Any) -> Any:
        try:
            return min(max(kind(value), kind(low)), kind(high))
        except (TypeError, ValueError):
            return value  # not a number: let validation report it

    return Annotated[kind, BeforeValidator(clamp)]


def _asked_frames(value: Any) -> Any:
    """``env_frames`` of an RL answer: absent (None or 0: the whole offer) or at least MIN_ENV_FRAMES; the offer
    itself caps it in :func:`~services.planner.answer_forms.rl_config_to_proto` (a schema is cached per
    vocabulary, the offer varies)."""
    if value is None or value == 0 or value == "":
        return None
    try:
        return min(max(int(value), MIN_ENV_FRAMES), MAX_ASKED_FRAMES)
    except (TypeError, ValueError):
        return value  # not a number: let validation report it


AskedFrames = Annotated[int | None, BeforeValidator(_asked_frames)]
MAX_COUNT = 2**31 - 1
"""The largest count a proto's ItemCount holds (int32): an item count's bound where the env names no stack limit."""


def item_count(stack_limit: int, default: int | None) -> tuple[Any, Any]:
    """An item count field: 1 to ``stack_limit`` (Describe's; 0: the env names none), a small model's out-of-range
    number corrected, not fatal."""
    high = stack_limit if stack_limit > 0 else MAX_COUNT
    count = clamped(int, 1, high)
    return (count if default is not None else count | None), Field(default, ge=1, le=high)


def one_of(name: str, values: tuple[str, ...]) -> Any:
    """A closed set of names; JSON schema ``enum`` (``name`` documents the call site)."""
    return Literal[values]  # type: ignore[valid-type]


def _skills_field(skills: tuple[str, ...]) -> tuple[Any, Any]:
    """A list of library skill names; with no skill offered, an empty list (never free text)."""
    if not skills:
        return list[str], Field(default_factory=list, max_length=0)
    return list[one_of("Skill", skills)], Field(default_factory=list, max_length=6)


@lru_cache(maxsize=32)
def _plan_models(achievements: tuple[str, ...], items: tuple[str, ...], skills: tuple[str, ...],
                 names: tuple[str, ...], stack_limit: int) -> tuple[Any, Any]:
    achievement_enum = one_of("Achievement", achievements)
    item_enum = one_of("Item", items)
    count_type, count_field = item_count(stack_limit, None)

    class Condition(BaseModel):
        """A success condition: an achievement, or at least `count` of an inventory item."""

        achievement: achievement_enum | None = None  # type: ignore[valid-type]
        item: item_enum | None = None  # type: ignore[valid-type]
        count: count_type = count_field  # type: ignore[valid-type]

        @model_validator(mode="after")
        def one_kind(self) -> Condition:
            if (self.achievement is None) == (self.item is None):
                raise ValueError("a condition names exactly one of `achievement` or `item` (with `count`)")
            return self

    subtask = create_model(
        "SubTask",
        name=(one_of("SubTaskName", names) if names else SnakeName, ...),
        description=(str, Field(max_length=400)),
        success=(list[Condition], Field(min_length=1, max_length=4)),
        decision=(Literal["code", "rl"], ...),
        skills=_skills_field(skills),
    )
    plan = create_model(
        "Plan",
        rationale=(str, Field(max_length=1200)),
        subtasks=(list[subtask], Field(min_length=1, max_length=MAX_SUBTASKS)),
    )
    return plan, Condition


def plan_schema(describe: env_pb2.DescribeResponse, skills: tuple[str, ...], *, achievements: tuple[str, ...] = (),
                items: tuple[str, ...] = (), names: tuple[str, ...] = ()) -> type[BaseModel]:
    """The plan's answer schema. ``achievements``/``items`` narrow the conditions' names (default: all of
    Describe's); ``names`` makes a sub-task's name one of them (default: any snake_case name)."""
    return _plan_models(achievements or tuple(describe.achievements), items or tuple(describe.items),
                        tuple(sorted(skills)), names, describe.stack_limit)[0]


@lru_cache(maxsize=32)
def _term_model(targets: tuple[str, ...], kinds: tuple[str, ...]) -> type[BaseModel]:
    return create_model(
        "RewardTerm",
        kind=(one_of("RewardKind", kinds) if kinds else str, ...),
        # null is how many models write "no target": it reads as "".
        target=(Annotated[one_of("Target", ("", "*", *targets)), BeforeValidator(lambda v: "" if v is None else v)],
                ""),
        weight=(clamped(float, -10, 10), ...),
    )


@lru_cache(maxsize=32)
def _rl_model(actions: tuple[str, ...], skills: tuple[str, ...], targets: tuple[str, ...],
              kinds: tuple[str, ...], observable: tuple[str, ...] = ()) -> type[BaseModel]:
    term = _term_model(targets, kinds)
    observe: Any = (list[one_of("Observed", observable)] if observable else list[str],
                    Field(default_factory=list, max_length=max(1, len(observable))))
    return create_model(
        "RLConfig",
        primitive_actions=(list[one_of("Action", actions)], Field(min_length=1, max_length=len(actions))),
        skills=_skills_field(skills),
        macro_actions=(list[MacroActionAnswer], Field(default_factory=list, max_length=MAX_MACRO_ACTIONS)),
        skill_max_steps=(clamped(int, 1, 200), ...),
        reward_terms=(list[term], Field(min_length=1, max_length=8)),
        episode_length=(clamped(int, 50, 5000), ...),
        env_frames=(AskedFrames, None),
        observe=observe,
        end_on_success=(bool, False),
    )


def rl_schema(describe: env_pb2.DescribeResponse, skills: tuple[str, ...]) -> type[BaseModel]:
    targets = tuple(dict.fromkeys((*describe.achievements, *describe.items)))
    labels = next((tuple(f.labels) for f in describe.observation if f.name == "vector"), ())
    return _rl_model(tuple(describe.actions), tuple(sorted(skills)), targets, offered(describe.reward_kinds),
                     choices(labels))


@lru_cache(maxsize=32)
def _kept_plan_model(actions: tuple[str, ...], targets: tuple[str, ...], kinds: tuple[str, ...],
                     max_threat_distance: int) -> type[BaseModel]:
    # The threat interrupt is offered only where the env names threats (Describe's threats).
    threat = {"hand_back_within": (clamped(int, 0, max_threat_distance), 0)} if max_threat_distance else {}
    return create_model(
        "KeptPlanConfig",
        primitive_actions=(list[one_of("Action", actions)], Field(min_length=1, max_length=len(actions))),
        macro_actions=(list[MacroActionAnswer], Field(default_factory=list, max_length=MAX_MACRO_ACTIONS)),
        skill_max_steps=(clamped(int, 1, 200), ...),
        reward_terms=(list[_term_model(targets, kinds)], Field(default_factory=list, max_length=6)),
        hand_back_when_hurt=(bool, False),
        **threat,
    )


def kept_plan_schema(describe: env_pb2.DescribeResponse) -> type[BaseModel]:
    """The fast agent's answer for RL around a kept plan: the primitives, macro actions, K and reward terms the
    planner's own (the plan's stages and the task's success, :data:`KEPT_PLAN_OWN_KINDS`) come on top of."""
    targets = tuple(dict.fromkeys((*describe.achievements, *describe.items)))
    kinds = tuple(k for k in offered(describe.reward_kinds) if k not in KEPT_PLAN_OWN_KINDS)
    return _kept_plan_model(tuple(describe.actions), targets, kinds,
                            describe.limits.max_threat_distance if describe.threats else 0)


KEPT_PLAN_OWN_KINDS = ("stage", "success")
"""The reward kinds the planner pays around a kept plan itself (the plan's progress and the task's success)."""
