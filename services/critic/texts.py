"""The critic's verdict texts, bounded: what a diagnosis or suggestion may hold, in whole sentences."""

from __future__ import annotations

MAX_TEXT = 600
"""Most characters of a sub-task verdict's diagnosis and suggestion (and of a whole-task verdict's suggestion)."""


def join_texts(parts: list[str], limit: int = MAX_TEXT) -> str:
    """Whole parts (sentences, quoted trajectories) within ``limit`` characters, in order; "(none)" when none fits."""
    text = ""
    for part in parts:
        if len(text) + len(part) + 1 > limit:
            break
        text = f"{text} {part}".strip()
    return text or "(none)"
