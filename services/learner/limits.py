"""The learner's limits on its requests (:mod:`rlgpt.request_limits`): checked before any RPC runs and served by
DescribeLearner."""

from __future__ import annotations

from rlgpt.request_limits import CALLS_AT_ONCE, PATH_CHARS, RequestLimits

LEARNER_LIMITS = RequestLimits(text_fields=frozenset({"TaskSpec.description"}),
                               fields={"EvaluateRequest.checkpoint": PATH_CHARS},
                               calls_at_once={"Evaluate": CALLS_AT_ONCE})
"""Names and ids (config names, actions, skills, job ids) of at most 128 characters, task descriptions of 8,192, lists
of 256 entries (the env server's own defaults, which every config reaches), a checkpoint path of 4,096; 16 Evaluate
calls at once (each plays its episodes for as long as they last)."""
