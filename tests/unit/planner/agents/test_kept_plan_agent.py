"""The kept-plan agent (the fast agent's part in RL around a kept plan): where the chain's failed episodes ended,
its answer schema, and its prompt and revision prompt."""

from __future__ import annotations

from kept_plan_support import FAILED, PLAN

from services.planner.agents.kept_plan import failures_text, kept_plan_answer, stage_ended, stages_done
from services.planner.schemas import kept_plan_schema


def test_a_failed_episode_ended_in_the_first_subtask_not_done() -> None:
    assert [stage_ended(PLAN, e) for e in FAILED] == ["wood", "pickaxe", "pickaxe"]
    assert stage_ended(PLAN, {"achievements": ["make_wood_pickaxe"]}) == "pickaxe"  # all done: the last one


def test_the_failures_say_where_and_how_episodes_ended() -> None:
    text = failures_text(PLAN, 0.25, FAILED)
    assert text.splitlines()[:3] == [
        "The chain succeeded in 25% of its evaluation episodes; 3 failed.",
        "- 1 ended before wood was done: 1 died (zombie: 1)",
        "- 2 ended before pickaxe was done: 1 died (arrow: 1); 1 ran out of frames"]
    assert "  end: died (zombie)" in text and "episode ending before wood was done, 300 frames:" in text




def test_the_stages_done_count_every_one_before_the_last_that_held() -> None:
    assert [stages_done(PLAN, e) for e in FAILED] == [[False, False, False], [True, True, False],
                                                      [True, True, False]]


def test_hand_back_when_hurt_is_the_callers_default_where_the_answer_does_not_say(describe) -> None:
    schema = kept_plan_schema(describe)
    said = {"primitive_actions": [describe.actions[0]], "skill_max_steps": 8}
    assert not kept_plan_answer(schema.model_validate(said)).plan_interrupt.damage  # a goal task's default
    assert kept_plan_answer(schema.model_validate(said), hurt=True).plan_interrupt.damage  # a game task's
    off = schema.model_validate({**said, "hand_back_when_hurt": False})
    assert not kept_plan_answer(off, hurt=True).plan_interrupt.damage
