"""The critic's limits on its requests (:mod:`rlgpt.request_limits`), from its settings: checked before a Judge or
JudgeTask runs and served by DescribeCritic."""

from __future__ import annotations

from rlgpt.request_limits import CALLS_AT_ONCE, RequestLimits
from services.critic.settings import CriticSettings
from services.critic.task_checks import MAX_LINKS

RULES_ENTRIES = 4096
"""Max entries of a list of the game's rules (WorldRules: materials, recipes, items, facts): MineDojo's recipes
run to hundreds, so the rules the env server serves need more than a request's usual list."""
RULES_TEXT_CHARS = 1 << 20
"""Max characters of the game's rules as text (WorldRules.text); Crafter's are about 4,000."""
TEXT_FIELDS = frozenset({
    "JudgeRequest.description", "JudgeRequest.code", "JudgeRequest.test_protocol", "JudgeRequest.rl_config",
    "JudgeTaskRequest.description", "EpisodeSummary.text", "SkillError.message", "SkillError.code_line",
    "WorldRules.facts", "WorldRules.text"})
"""The string fields of the critic's requests that hold free text (code, trajectories, errors, rules)."""
RULES_LISTS = ("WorldRules.materials", "WorldRules.walkable", "WorldRules.collect", "WorldRules.place",
               "WorldRules.make", "WorldRules.items", "WorldRules.facts")


def critic_limits(settings: CriticSettings) -> RequestLimits:
    """Texts (code, descriptions, trajectories) of at most ``max_code_bytes`` characters, bytes fields (frames,
    animations) of at most ``max_frame_bytes``, and the request's own counts: rollouts, errors, frames, curve
    points, links; 16 Judge and 16 JudgeTask calls at once (each may wait on the LLM for as long as its timeout)."""
    return RequestLimits(
        text_chars=settings.max_code_bytes, max_bytes=settings.max_frame_bytes, text_fields=TEXT_FIELDS,
        fields={"JudgeRequest.rollouts": settings.max_rollouts, "JudgeRequest.errors": settings.max_rollouts,
                "JudgeTaskRequest.episodes": settings.max_rollouts, "JudgeRequest.frames": settings.max_frames,
                "JudgeRequest.curve": settings.max_curve_points, "JudgeTaskRequest.links": MAX_LINKS,
                "WorldRules.text": RULES_TEXT_CHARS, **dict.fromkeys(RULES_LISTS, RULES_ENTRIES)},
        calls_at_once={"Judge": CALLS_AT_ONCE, "JudgeTask": CALLS_AT_ONCE})
