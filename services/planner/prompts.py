"""The planner's prompts, one text file per prompt under ``prompts/``."""

from __future__ import annotations

from pathlib import Path

from rlgpt.prompts import render_file

PROMPT_DIR = Path(__file__).parent / "prompts"


def render(name: str, **fields: str) -> str:
    return render_file(PROMPT_DIR / f"{name}.txt", **fields)
