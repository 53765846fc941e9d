"""What the services that prompt an LLM share (planner and critic).

Prompt templates are text files: ``{name}`` fields filled by name; header lines starting with '#' are docs.
Also here: the texts both services put into prompts (success conditions, shortened prose) and what they need
from an LLM client.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rlgpt.v1 import common_pb2

if TYPE_CHECKING:
    from rlgpt.llm.client import CallRecord

_FIELD = re.compile(r"\{([a-z_]+)\}")
_SENTENCE_END = re.compile(r"[.!?](?=\s)")


@cache
def _template(path: Path) -> str:
    text = path.read_text()
    # Header lines document the prompt (e.g. which tasks its few-shot example covers); the model never sees them.
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip() + "\n"


def render_file(path: Path, /, **fields: str) -> str:
    """Fills ``{field}`` placeholders; JSON braces in examples are left alone; a missing field is a KeyError."""
    template = _template(path)
    missing = sorted(set(_FIELD.findall(template)) - set(fields))
    if missing:
        raise KeyError(f"prompt {path.stem!r} needs fields {missing}")
    return _FIELD.sub(lambda m: fields[m.group(1)], template)


def copies_template(answer: Any, path: Path, shortest: int = 12) -> bool:
    """Whether an answer copies its prompt's template: one of its texts (a name, a description, a diagnosis, code;
    at least ``shortest`` characters) appears word for word in the template, examples and answer form included
    (its header lines, which the model never sees, left out). Small models copy their few-shot example."""
    text = _template(path)
    escaped = text.replace('\\n', "\n").replace('\\"', '"')  # code inside a JSON example, as the model reads it

    def leaves(node: Any) -> list[str]:
        if isinstance(node, dict):
            return [leaf for value in node.values() for leaf in leaves(value)]
        if isinstance(node, list):
            return [leaf for value in node for leaf in leaves(value)]
        return [node.strip()] if isinstance(node, str) and len(node.strip()) >= shortest else []

    return any(leaf in text or leaf in escaped for leaf in leaves(answer))


def render(directory: Path, name: str, /, **fields: str) -> str:
    """The prompt ``name`` of a service's prompt folder (``directory/<name>.txt``), fields filled."""
    return render_file(directory / f"{name}.txt", **fields)


class CompletesJSON(Protocol):
    """What planner and critic need from an LLM client (LLMClient, ReplayClient, or a scripted double)."""

    def complete(self, agent: str, messages: list[dict[str, Any]], schema: type[Any], *, iteration: int = 0,
                 validate: Any = None, seed: int | None = None) -> tuple[Any, CallRecord]: ...


def conditions_text(conditions: list[common_pb2.Condition], none: str = "none") -> str:
    """Success conditions in words ("achievement collect_wood and at least 2 wood"); ``none`` when there are
    none. A condition with no kind set says nothing and is left out."""
    parts = []
    for c in conditions:
        if c.WhichOneof("kind") == "achievement":
            parts.append(f"achievement {c.achievement}")
        elif c.WhichOneof("kind") == "inventory":
            parts.append(f"at least {c.inventory.count} {c.inventory.item}")
    return " and ".join(parts) or none


def shorten(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else cut after its last whole sentence that fits (or, with
    no sentence end in the second half, after the last whole word) and marked with " ..."; never mid-word."""
    text = text.strip()
    if len(text) <= limit:
        return text
    room = max(1, limit - 4)
    head = text[: room + 1]
    ends = [m.end() for m in _SENTENCE_END.finditer(head) if m.end() <= room]
    if ends and ends[-1] >= room // 2:
        cut = ends[-1]
    else:
        space = head.rfind(" ", 0, room + 1)
        cut = space if space > 0 else room
    return text[:cut].rstrip() + " ..."
