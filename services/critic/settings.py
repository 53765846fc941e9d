"""The critic's settings; the loader and the settings services share are in :mod:`rlgpt.config`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from rlgpt.config import Settings, setting


@dataclasses.dataclass(frozen=True)
class CriticSettings(Settings):
    """Settings of the critic (``RLGPT_CRITIC_*``); the LLM has its own (``RLGPT_LLM_*``)."""

    env_prefix: ClassVar[str] = "RLGPT_CRITIC"

    success_threshold: float = setting(0.8, "Success rate at which a sub-task counts as solved (the one owner: the "
                                            "planner reads it through DescribeCritic).", ge=0, le=1)
    use_llm: bool = setting(True, "Ask the LLM for the diagnosis and suggestion; off: deterministic verdicts only.")
    llm_on_pass: bool = setting(False, "Ask the LLM also about an attempt whose measured rate passed (the sub-task "
                                       "is kept either way; the LLM could only reword the diagnosis); off saves one "
                                       "LLM call per passed attempt.")
    attach_frames: bool = setting(False, "Send the PNG frames of failed episodes to a vision model; turn on only "
                                         "when the configured model accepts images.")
    max_rollouts: int = setting(256, "Max rollouts (episode summaries) in one Judge request.", ge=1)
    max_code_bytes: int = setting(65536, "Max size of the skill source in one Judge request, bytes.", ge=64)
    max_frames: int = setting(8, "Max PNG frames in one Judge request.", ge=0)
    max_frame_bytes: int = setting(2_000_000, "Max size of one PNG frame, bytes.", ge=1024)
    max_curve_points: int = setting(10000, "Max learning-curve points in one Judge request.", ge=1)
    flat_curve_min_points: int = setting(5, "Curve points (the last ones) the flat-curve check looks at; a "
                                            "shorter curve is never called flat.", ge=2)
    flat_curve_tolerance: float = setting(0.02, "A curve is flat when its last points' success rate varies by "
                                                "less than this and its mean return by less than this times "
                                                "max(1, |mean return|).", ge=0)
    dead_loop_repeats: int = setting(20, "Repeats of one action with no inventory change that count as a "
                                         "dead loop.", ge=2)
