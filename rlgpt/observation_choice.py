"""Which entries of a session's observation vector a policy sees (``CreateSessionRequest.observe``,
``RLConfig.observe``): the agents choose them by name, the env server fills only those, and the learner checks a
config's choice when it starts training. The names come from Describe's vector labels ("status/health",
"inventory/wood"): a full label, or its group (the part before the "/", e.g. "inventory") for all of that group.
The image is always observed."""

from __future__ import annotations

from collections.abc import Sequence


def groups(labels: Sequence[str]) -> tuple[str, ...]:
    """The labels' groups, in their order ("status", "inventory", ...)."""
    return tuple(dict.fromkeys(label.split("/", 1)[0] for label in labels if "/" in label))


def choices(labels: Sequence[str]) -> tuple[str, ...]:
    """Every name a choice may hold: the groups, then the labels."""
    return (*groups(labels), *labels)


def observed(labels: Sequence[str], chosen: Sequence[str]) -> tuple[list[bool], list[str]]:
    """Per label, whether ``chosen`` keeps it (an empty choice keeps all), and the chosen names that name no
    label or group (to be refused)."""
    if not chosen:
        return [True] * len(labels), []
    wanted = set(chosen)
    unknown = [name for name in dict.fromkeys(chosen) if name not in set(choices(labels))]
    return [label in wanted or label.split("/", 1)[0] in wanted for label in labels], unknown
