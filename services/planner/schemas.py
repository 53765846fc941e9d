"""The agents' answer types, built per env from its vocabulary.

Names the env knows (achievements, items, actions, skills) become enums in the JSON schema, so a
server with constrained decoding (llama.cpp, vLLM) can only produce valid names, and pydantic
rejects invalid ones from servers without it.
"""

from __future__ import annotations

import enum
import re
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, create_model, model_validator

from rlgpt.observation_choice import choices
from rlgpt.reward_kinds import offered, takes_target
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from rlgpt.world_rules import achievement_rule, ways_to_get

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
CODE_LIMIT = f"{SKILL_CODE_LIMITS['max_length']:,}"
"""The longest code an answer may hold, as the prompts state it (a capable model writes longer code unless told)."""
"""A coded skill's source, as long as the fast agent may write it (skills and macro actions alike)."""
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


def _clamped(kind: type, low: float, high: float) -> Any:
    """A number forced into [low, high]: a small model's out-of-range value is corrected, not fatal."""

    def clamp(value: Any) -> Any:
        try:
            return min(max(kind(value), kind(low)), kind(high))
        except (TypeError, ValueError):
            return value  # not a number: let validation report it

    return Annotated[kind, BeforeValidator(clamp)]


def _asked_frames(value: Any) -> Any:
    """``env_frames`` of an RL answer: absent (None or 0: the whole offer) or at least MIN_ENV_FRAMES; the offer
    itself caps it in :func:`rl_config_to_proto` (a schema is cached per vocabulary, the offer varies)."""
    if value is None or value == 0 or value == "":
        return None
    try:
        return min(max(int(value), MIN_ENV_FRAMES), MAX_ASKED_FRAMES)
    except (TypeError, ValueError):
        return value  # not a number: let validation report it


AskedFrames = Annotated[int | None, BeforeValidator(_asked_frames)]


def _enum(name: str, values: tuple[str, ...]) -> Any:
    """A closed set of names; JSON schema ``enum`` (``name`` documents the call site)."""
    return Literal[values]  # type: ignore[valid-type]


def _skills_field(skills: tuple[str, ...]) -> tuple[Any, Any]:
    """A list of library skill names; with no skill offered, an empty list (never free text)."""
    if not skills:
        return list[str], Field(default_factory=list, max_length=0)
    return list[_enum("Skill", skills)], Field(default_factory=list, max_length=6)


@lru_cache(maxsize=32)
def _plan_models(achievements: tuple[str, ...], items: tuple[str, ...], skills: tuple[str, ...],
                 names: tuple[str, ...] = ()) -> tuple[Any, Any]:
    achievement_enum = _enum("Achievement", achievements)
    item_enum = _enum("Item", items)

    class Condition(BaseModel):
        """A success condition: an achievement, or at least `count` of an inventory item."""

        achievement: achievement_enum | None = None  # type: ignore[valid-type]
        item: item_enum | None = None  # type: ignore[valid-type]
        count: _clamped(int, 1, 9) | None = Field(default=None, ge=1, le=9)  # type: ignore[valid-type]

        @model_validator(mode="after")
        def one_kind(self) -> Condition:
            if (self.achievement is None) == (self.item is None):
                raise ValueError("a condition names exactly one of `achievement` or `item` (with `count`)")
            return self

    subtask = create_model(
        "SubTask",
        name=(_enum("SubTaskName", names) if names else SnakeName, ...),
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
                        tuple(sorted(skills)), names)[0]


@lru_cache(maxsize=32)
def _term_model(targets: tuple[str, ...], kinds: tuple[str, ...]) -> type[BaseModel]:
    return create_model(
        "RewardTerm",
        kind=(_enum("RewardKind", kinds) if kinds else str, ...),
        # null is how many models write "no target": it reads as "".
        target=(Annotated[_enum("Target", ("", "*", *targets)), BeforeValidator(lambda v: "" if v is None else v)],
                ""),
        weight=(_clamped(float, -10, 10), ...),
    )


@lru_cache(maxsize=32)
def _rl_model(actions: tuple[str, ...], skills: tuple[str, ...], targets: tuple[str, ...],
              kinds: tuple[str, ...], observable: tuple[str, ...] = ()) -> type[BaseModel]:
    term = _term_model(targets, kinds)
    observe: Any = (list[_enum("Observed", observable)] if observable else list[str],
                    Field(default_factory=list, max_length=max(1, len(observable))))
    return create_model(
        "RLConfig",
        primitive_actions=(list[_enum("Action", actions)], Field(min_length=1, max_length=len(actions))),
        skills=_skills_field(skills),
        macro_actions=(list[MacroActionAnswer], Field(default_factory=list, max_length=MAX_MACRO_ACTIONS)),
        skill_max_steps=(_clamped(int, 1, 200), ...),
        reward_terms=(list[term], Field(min_length=1, max_length=8)),
        episode_length=(_clamped(int, 50, 5000), ...),
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
    threat = {"hand_back_within": (_clamped(int, 0, max_threat_distance), 0)} if max_threat_distance else {}
    return create_model(
        "KeptPlanConfig",
        primitive_actions=(list[_enum("Action", actions)], Field(min_length=1, max_length=len(actions))),
        macro_actions=(list[MacroActionAnswer], Field(default_factory=list, max_length=MAX_MACRO_ACTIONS)),
        skill_max_steps=(_clamped(int, 1, 200), ...),
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


def _value(x: Any) -> Any:
    return x.value if isinstance(x, enum.Enum) else x


def plan_to_proto(answer: BaseModel, iteration: int) -> planner_pb2.Plan:
    subtasks = []
    seen: dict[str, int] = {}
    for st in answer.subtasks:
        conditions = []
        for c in st.success:
            if c.achievement is not None:
                conditions.append(common_pb2.Condition(achievement=_value(c.achievement)))
            else:
                conditions.append(common_pb2.Condition(inventory=common_pb2.ItemCount(item=_value(c.item),
                                                                                      count=c.count or 1)))
        # Sub-tasks are keyed by name: a repeated name (a copied example) gets a suffix instead of merging.
        seen[st.name] = seen.get(st.name, 0) + 1
        name = st.name if seen[st.name] == 1 else f"{st.name[:44]}_{seen[st.name]}"
        subtasks.append(planner_pb2.SubTask(
            name=name, description=st.description, success=conditions,
            decision=planner_pb2.DECISION_CODE if st.decision == "code" else planner_pb2.DECISION_RL,
            skills=[_value(s) for s in st.skills]))
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
        observe=list(dict.fromkeys(_value(o) for o in getattr(answer, "observe", None) or [])),
        primitive_actions=list(dict.fromkeys(_value(a) for a in answer.primitive_actions)),
        skills=list(dict.fromkeys(_value(s) for s in answer.skills)), skill_max_steps=answer.skill_max_steps,
        # Only some kinds take a target (rlgpt.reward_kinds); a model's stray target elsewhere is dropped.
        reward_terms=[common_pb2.RewardTerm(kind=_value(t.kind), weight=t.weight,
                                            target=_value(t.target) if takes_target(_value(t.kind)) else "")
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


_MOVES = ("move_left", "move_right", "move_up", "move_down")
_QUOTED = re.compile(r'"([a-z_]+)"')


def _interact_action(rules: common_pb2.WorldRules) -> str | None:
    """The action the rules collect with (Crafter: "do"), when they use one for every material."""
    actions = {rule.action for rule in rules.collect if rule.action}
    return actions.pop() if len(actions) == 1 else None


def actions_for(condition: common_pb2.Condition, rules: common_pb2.WorldRules, actions: list[str]) -> list[str]:
    """The primitive actions that reach ``condition``, read from the rules.

    An item: the actions of the rules that give it (collect, make) or place it. An achievement: the action of
    the rule that unlocks it. Achievements no rule covers (in Crafter: creatures, eating a plant, waking up;
    the game's data has no recipe for them) fall back, in order, to: the achievement itself when it is an action
    name; the actions the rules' facts quote in the sentence naming the achievement ("sleep" for wake_up, "do"
    for eat_cow); the action the rules collect with (hitting a creature uses it too). Nothing else is assumed.
    """
    if condition.WhichOneof("kind") == "inventory":
        item = condition.inventory.item
        found = [w.action for w in ways_to_get(rules, item)] + [r.action for r in rules.place if r.item == item]
    else:
        achievement = condition.achievement
        rule = achievement_rule(rules, achievement)
        if rule is not None:
            found = [rule.action]
        elif achievement in actions:
            found = [achievement]
        else:
            named = re.compile(rf"\b{re.escape(achievement)}\b")
            found = [a for fact in rules.facts if named.search(fact) for a in _QUOTED.findall(fact) if a in actions]
    if not found and (interact := _interact_action(rules)):
        found = [interact]
    return [a for a in dict.fromkeys(found) if a in actions]


def complete_action_space(config: learner_pb2.RLConfig, actions: list[str],
                          rules: common_pb2.WorldRules) -> list[str]:
    """Adds the primitive actions without which the config's own success condition cannot be reached.

    Weak models leave out the one action a sub-task needs (``make_wood_pickaxe`` without the
    ``make_wood_pickaxe`` action) or every move; training such a space wastes its whole budget. Each success
    condition gets the actions :func:`actions_for` reads from the rules; the agent must be able to move.
    Returns what was added.
    """
    if not config.primitive_actions:
        return []  # empty means all actions
    needed: list[str] = [a for a in _MOVES if a in actions]
    for condition in config.task.success:
        needed += actions_for(condition, rules, actions)
    added = [a for a in dict.fromkeys(needed) if a in actions and a not in config.primitive_actions]
    config.primitive_actions.extend(added)
    return added


SUCCESS_REWARD = 10.0
"""The weight of the success term a config gets when its own reward never pays its sub-task's success (and pure
RL's)."""


def _pays_success(term: common_pb2.RewardTerm, conditions: list[common_pb2.Condition]) -> bool:
    """Whether a term pays (positively) for reaching one of the conditions."""
    if term.weight <= 0:
        return False
    achievements = {c.achievement for c in conditions if c.WhichOneof("kind") == "achievement"}
    items = {c.inventory.item for c in conditions if c.WhichOneof("kind") == "inventory"}
    return (term.kind == "success"
            or (term.kind == "achievement" and (term.target == "*" or term.target in achievements))
            or (term.kind == "inventory_gain" and (term.target == "*" or term.target in items))
            or (term.kind == "native" and bool(achievements)))  # the game's own reward pays achievements


def complete_reward(config: learner_pb2.RLConfig) -> str:
    """Drops terms of weight 0 (they pay nothing) and adds a success term when no term pays the sub-task's
    success: RL cannot learn what it is never paid for. Embedded Gemma 3 270M answered make_wood_pickaxe with
    health at weight 0 and death at -1 only; its training stayed near chance. Returns what was done ('' for
    nothing)."""
    kept = [t for t in config.reward_terms if t.weight != 0]
    done = [f"dropped {len(config.reward_terms) - len(kept)} term(s) of weight 0"] if len(kept) < len(
        config.reward_terms) else []
    if not any(_pays_success(t, list(config.task.success)) for t in kept):
        kept.append(common_pb2.RewardTerm(kind="success", weight=SUCCESS_REWARD))
        done.append(f"added success (weight {SUCCESS_REWARD:g}): no term paid the sub-task's success")
    del config.reward_terms[:]
    config.reward_terms.extend(kept)
    return "; ".join(done)

