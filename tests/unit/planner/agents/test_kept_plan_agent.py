"""The kept-plan agent (the fast agent's part in RL around a kept plan): where the chain's failed episodes ended,
its answer schema, and its prompt and revision prompt."""

from __future__ import annotations

from kept_plan_support import FAILED, PLAN

from services.planner.agents.kept_plan import failures_text, stage_ended


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


