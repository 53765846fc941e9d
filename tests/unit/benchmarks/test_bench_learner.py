"""bench-learner's in-process env is the learner's env over a local session: same worlds, rewards, info and stats."""

from __future__ import annotations

import pytest

from benchmarks.learner.inprocess import LocalSession
from benchmarks.learner.measure import rl_config


def test_local_session_refuses_skills() -> None:
    config = rl_config(frames=1000, seed=2)
    config.skills.append("anything")
    with pytest.raises(ValueError, match="primitive actions only"):
        LocalSession(config, 1)
