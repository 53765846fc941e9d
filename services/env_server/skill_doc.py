"""The skill API text that ``Describe`` serves: the agent API, the sandbox's rules and the world's rules.

Composed here from their owners (the backend's agent documentation, :data:`sandbox.SANDBOX_RULES`, the
rules generated from the game) so that no fact in the text is typed twice.
"""

from __future__ import annotations

from rlgpt.v1 import common_pb2
from services.env_server.backends.base import BackendSpec


def skill_api_text(spec: BackendSpec, rules: common_pb2.WorldRules | None) -> str:
    """The documentation an LLM reads before writing a skill for ``spec``'s backend."""
    from services.env_server.skills import sandbox

    parts = [spec.skill_api.rstrip(), f"Actions: {', '.join(spec.actions)}."]
    sandbox_rules = getattr(sandbox, "SANDBOX_RULES", "")
    if sandbox_rules:
        parts.append("What skill code may use:\n" + sandbox_rules.rstrip())
    if rules is not None and rules.text:
        parts.append("The world's rules (generated from the game itself):\n" + rules.text)
    return "\n\n".join(parts) + "\n"
