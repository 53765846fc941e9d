"""The env server's limits on its requests (:mod:`rlgpt.request_limits`), from its settings: checked before any RPC
runs and served in Describe (``limits.requests``)."""

from __future__ import annotations

from rlgpt.request_limits import RequestLimits
from services.env_server.settings import EnvServerSettings

PAGE_TOKEN_MAX_CHARS = 1024
"""Tokens this server issues are far shorter; a longer one is refused before decoding."""
TEXT_FIELDS = frozenset({"TaskSpec.description", "RegisterSkillRequest.description", "RegisterSkillRequest.code"})
"""The string fields of the env server's requests that hold free text."""


def env_limits(settings: EnvServerSettings) -> RequestLimits:
    """Names of at most ``max_name_chars``, descriptions of ``max_text_chars``, code of ``max_code_bytes`` characters
    (its bytes are checked when it is registered), lists of ``max_list_entries`` entries but a step's actions and env
    indices: ``max_envs_per_session``; ``max_skill_tests`` RunSkill calls at once, and as many RegisterSkill calls (each
    test-runs its skill, up to its registration timeout, on a thread of its own)."""
    envs = settings.max_envs_per_session
    return RequestLimits(
        name_chars=settings.max_name_chars, text_chars=settings.max_text_chars,
        list_entries=settings.max_list_entries, text_fields=TEXT_FIELDS,
        fields={"RegisterSkillRequest.code": settings.max_code_bytes,
                "ListSkillsRequest.page_token": PAGE_TOKEN_MAX_CHARS, "ResetRequest.env_indices": envs,
                "StepRequest.actions": envs, "StepRequest.env_indices": envs},
        calls_at_once={"RunSkill": settings.max_skill_tests, "RegisterSkill": settings.max_skill_tests})
