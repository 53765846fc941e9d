"""Dead loops in skill test episodes, judged by the critic's own check (services/critic/checks.py), never a copy.

An episode is a dead loop when the critic's ``dead_loops`` check, given that episode alone, has a finding: one
action repeated at least ``repeats`` times with no inventory change (``dead_loop`` on the episode's trajectory
text), or the time limit reached with nothing unlocked. ``repeats`` is the critic's setting
(``RLGPT_CRITIC_DEAD_LOOP_REPEATS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlgpt.v1 import common_pb2
from services.critic.checks import dead_loop, dead_loops
from services.critic.settings import CriticSettings


def critic_repeats() -> int:
    """The repeats the critic counts as a dead loop, from its settings (environment included)."""
    return CriticSettings.load().dead_loop_repeats


def episode_loops(episodes: Sequence[common_pb2.EpisodeSummary], repeats: int) -> dict[str, Any]:
    """Of ``episodes``: how many ran, how many the critic calls dead loops, the repeated actions found (action,
    run length) and how many were dead loops only for running out of time with nothing unlocked."""
    flagged = [e for e in episodes if dead_loops([e], repeats)]
    loops = [loop for e in flagged if (loop := dead_loop(e.text, repeats))]
    return {"episodes": len(episodes), "dead_loop_episodes": len(flagged),
            "loops": [{"action": action, "count": count} for action, count in loops],
            "idle_episodes": len(flagged) - len(loops)}
