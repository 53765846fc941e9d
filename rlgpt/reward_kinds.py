"""The reward term vocabulary (``rlgpt.v1.RewardTerm.kind``, documented in proto/rlgpt/v1/common.proto) as data.

``RewardTerm.kind`` is a string on the wire; which kinds a backend accepts comes from ``Describe``
(``reward_kinds``). What each kind means, and whether it takes a target, is written here once, for every service:
the planner (its agents' schema and prompt), the learner (config checks) and the env server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class RewardKind:
    """One kind of dense reward term."""

    name: str
    takes_target: bool
    """Whether the term names a target (an achievement or item name, or "*" for any); the others take ""."""
    doc: str
    """What the term pays, in the words the agents' prompts use."""
    needs_stages: bool = False
    """Pays only in sessions with stages (a kept plan); the agents' RL configs have none, so they are not
    offered it (:func:`offered`)."""


REWARD_KINDS: dict[str, RewardKind] = {k.name: k for k in (
    RewardKind("success", False, "weight once, on the frame the success condition first holds (no target)"),
    RewardKind("achievement", True, "weight when the target achievement (or any, \"*\") is first unlocked in an "
               "episode: once per achievement and episode, however often it is done again"),
    RewardKind("inventory_gain", True, "weight per unit of the target item (or any, \"*\") gained; losses are not "
                                       "penalised"),
    RewardKind("step", False, "weight on every frame (a small negative weight is a time penalty; no target)"),
    RewardKind("health", False, "weight times the change of health on the frame (no target)"),
    RewardKind("death", False, "weight on the frame the player dies (no target)"),
    RewardKind("native", False, "weight times the game's own reward (no target)"),
    RewardKind("stage", False, "weight each time one of the session's stages (a kept plan's sub-tasks) is first "
                               "done in an episode; a session without stages never pays it (no target)",
               needs_stages=True),
)}
"""Every kind RewardTerm defines, in the order common.proto lists them."""

TARGETED_KINDS = frozenset(k.name for k in REWARD_KINDS.values() if k.takes_target)
"""The kinds whose target names an achievement or an item."""


def offered(kinds: Iterable[str]) -> tuple[str, ...]:
    """The kinds (as an env server lists them) that can pay in an RL config the agents write: those that need
    session stages are left out (a kind this module does not know is kept)."""
    return tuple(k for k in kinds if not (k in REWARD_KINDS and REWARD_KINDS[k].needs_stages))


def takes_target(kind: str) -> bool:
    """Whether ``kind`` takes a target (a kind this module does not know takes none)."""
    return kind in TARGETED_KINDS
