"""Prompt templates as text files: ``{name}`` fields filled by name; header lines starting with '#' are docs."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_FIELD = re.compile(r"\{([a-z_]+)\}")


@cache
def _template(path: Path) -> str:
    text = path.read_text()
    # Header lines document the prompt (e.g. which tasks its few-shot example covers); the model never sees them.
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip() + "\n"


def render_file(path: Path, **fields: str) -> str:
    """Fills ``{field}`` placeholders; JSON braces in examples are left alone; a missing field is a KeyError."""
    template = _template(path)
    missing = sorted(set(_FIELD.findall(template)) - set(fields))
    if missing:
        raise KeyError(f"prompt {path.stem!r} needs fields {missing}")
    return _FIELD.sub(lambda m: fields[m.group(1)], template)
