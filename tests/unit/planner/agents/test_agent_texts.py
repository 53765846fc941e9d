"""The prompt texts the agents share: a revision's macro actions' code and learning curve."""

from __future__ import annotations


def test_a_revision_shows_its_macro_actions_code_whole_within_a_bound() -> None:
    from services.planner.agents.texts import MAX_SHOWN_CODE_CHARS, MAX_SHOWN_MACRO_CHARS, curve_text, shown_macros

    small, big = "def skill(agent):\n    yield 'noop'\n", "x" * (MAX_SHOWN_CODE_CHARS + 1)
    fill = "y" * (MAX_SHOWN_MACRO_CHARS - len(small))  # too big on its own: it never counts against the rest
    shown = shown_macros({"a__small": small, "a__big": big, "a__fill": fill, "a__last": small})
    assert shown["a__small"] == small and shown["a__last"] == small
    assert shown["a__big"].startswith(f"(code of {len(big)} characters, too long") and shown["a__fill"] != fill
    assert sum(len(code) for code in shown.values()) < MAX_SHOWN_MACRO_CHARS
    assert curve_text([]) == "(none)"
    points = [{"env_frames": 9000 + i, "training_frames": i, "success_rate": 0.5, "mean_return": 1} for i in range(3)]
    assert curve_text(points).splitlines()[0] == "- 0 frames: success 50%, mean return 1.00"
    assert curve_text([{"env_frames": 7, "success_rate": 0, "mean_return": 0}]) == \
        "- 7 frames: success 0%, mean return 0.00"  # a state written before training_frames


def test_evenly_keeps_the_ends_and_spreads_the_rest() -> None:
    from services.planner.agents.texts import evenly

    assert evenly(list(range(11)), 6) == [0, 2, 4, 6, 8, 10]
    assert evenly(list(range(10)), 3) == [0, 4, 9]  # round(4.5) == 4: the middle as Python rounds it
    assert evenly([1, 2], 6) == [1, 2] and evenly([], 3) == []
    assert evenly([1, 2, 3], 1) == [3] and evenly([1, 2, 3], 0) == []
