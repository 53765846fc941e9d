"""Pure helpers of the two loops (the loops themselves run against real services in tests/integration)."""

from __future__ import annotations

from services.planner.loops import training_frames


def test_training_frames_leave_a_share_for_later_rl_subtasks() -> None:
    assert training_frames(15000, None, 3) == 15000  # no run budget: the per-training budget
    assert training_frames(15000, 60000, 0) == 15000
    assert training_frames(15000, 30000, 1) == 15000  # half of what is left
    assert training_frames(15000, 20000, 1) == 10000
    assert training_frames(15000, 30000, 2) == 10000
    assert training_frames(15000, 9000, 0) == 9000  # the last sub-task takes what is left
