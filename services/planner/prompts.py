"""Prompt templates, one text file per prompt under ``prompts/``; ``{name}`` fields are filled by name."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

PROMPT_DIR = Path(__file__).parent / "prompts"
_FIELD = re.compile(r"\{([a-z_]+)\}")


@cache
def _template(name: str) -> str:
    text = (PROMPT_DIR / f"{name}.txt").read_text()
    # Header lines starting with "#" document the prompt (e.g. which tasks its examples cover).
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip() + "\n"


def render(name: str, **fields: str) -> str:
    """Fills ``{field}`` placeholders; JSON braces in examples are left alone; a missing field is an error."""
    template = _template(name)
    missing = sorted(set(_FIELD.findall(template)) - set(fields))
    if missing:
        raise KeyError(f"prompt {name!r} needs fields {missing}")
    return _FIELD.sub(lambda m: fields[m.group(1)], template)
