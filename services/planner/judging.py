"""The verdict on an attempt: the critic's (told the episodes, frames of them, the code or config, the curve and the
protocol the agent read), or without a critic one from the measured success rate.

The critic owns the success rate at which a sub-task counts as solved and the limits of a Judge request; the
planner reads both from its ``DescribeCritic``, so a run's setups without the critic's verdicts count on the same
rate as the setup with them."""

from __future__ import annotations

import logging

from rlgpt import deadlines
from rlgpt.llm.client import record_from_json
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, planner_pb2
from services.planner.context import AgentSetup, RunContext
from services.planner.state import Decision

log = logging.getLogger(__name__)
PASSING_RATE_WITHOUT_CRITIC = 0.5
"""The measured success rate at which a sub-task counts as solved by a planner that has no critic at all (none to
ask); with one, the critic's (:func:`success_threshold`)."""
JUDGE_FRAMES_PER_EPISODE = 4
"""Frames asked for per test or evaluation episode when a critic judges (it looks at them where its
RLGPT_CRITIC_ATTACH_FRAMES is on): the first observation, two between, the last."""
JUDGE_ROLLOUTS = 64
"""Most episodes (and errors) one Judge request carries, fewer where the critic allows fewer."""
JUDGE_CURVE_POINTS = 2000
"""Most learning-curve points (the last ones) one Judge request carries, fewer where the critic allows fewer."""


def critic_terms(ctx: RunContext) -> critic_pb2.DescribeCriticResponse | None:
    """The critic's threshold and limits (its DescribeCritic); None for a planner without a critic."""
    if ctx.stubs.critic is None:
        return None
    return ctx.stubs.critic.DescribeCritic(critic_pb2.DescribeCriticRequest(), timeout=deadlines.QUICK_SECONDS)


def success_threshold(ctx: RunContext) -> float:
    """The success rate at which a sub-task counts as solved: the critic's, whether or not it judges this setup."""
    terms = critic_terms(ctx)
    return terms.success_threshold if terms is not None else PASSING_RATE_WITHOUT_CRITIC


def increasing(points: list[critic_pb2.CurvePoint]) -> list[critic_pb2.CurvePoint]:
    """Curve points with strictly increasing frames (the critic refuses repeats)."""
    out: list[critic_pb2.CurvePoint] = []
    for p in points:
        if not out or p.env_frames > out[-1].env_frames:
            out.append(p)
    return out


def measured_verdict(rollouts: list[common_pb2.EpisodeSummary], errors: list[common_pb2.SkillError],
                     threshold: float) -> critic_pb2.Verdict:
    """The verdict without a critic's: the agents only see the measured success rate and the first error; solved at
    ``threshold`` (:func:`success_threshold`)."""
    rate = sum(e.success for e in rollouts) / len(rollouts) if rollouts else 0.0
    error = errors[0] if errors else None
    passed = rate >= threshold
    return critic_pb2.Verdict(success=passed, success_rate=rate,
                              target=critic_pb2.TARGET_KEEP if passed else critic_pb2.TARGET_FAST,
                              diagnosis=f"success rate {rate:.0%}" + (f"; error {error.type}: {error.message}"
                                                                      if error else ""))


def judge_frames(episodes: list[common_pb2.EpisodeSummary], frames: list[env_pb2.EpisodeFrames]
                 ) -> list[list[bytes]]:
    """Each episode's frames in step order, failed episodes first (they carry the diagnosis); :func:`judge` sends
    as many whole episodes as fit in the critic's max_frames."""
    order = sorted(range(min(len(episodes), len(frames))), key=lambda i: episodes[i].success)
    return [list(frames[i].png) for i in order]


def shortened_code(code: str, max_bytes: int) -> str:
    """``code`` cut to at most ``max_bytes`` bytes of UTF-8, never inside a character."""
    return code.encode()[:max_bytes].decode(errors="ignore")


def whole_episodes(frames: list[list[bytes]], limit: int) -> list[bytes]:
    """The first episodes' frames that fit in ``limit`` frames, whole episodes only."""
    chosen: list[bytes] = []
    for episode in frames:
        if len(chosen) + len(episode) > limit:
            break
        chosen.extend(episode)
    return chosen


def critic_judges(ctx: RunContext) -> bool:
    """Whether the run's critic judges its attempts (a critic is configured and the agent setup has one)."""
    return ctx.stubs.critic is not None and ctx.agents == AgentSetup.SLOW_FAST_CRITIC


def frames_per_episode(ctx: RunContext) -> int:
    """Frames to ask RunSkill and Evaluate for: some when a critic judges (it decides whether it looks at
    them), none otherwise; never more than the env server's limit (Describe's ServerLimits)."""
    if not critic_judges(ctx):
        return 0
    return min(JUDGE_FRAMES_PER_EPISODE, ctx.describe.limits.max_frames_per_episode)


def judge(ctx: RunContext, st: planner_pb2.SubTask, decision: Decision, rollouts: list[common_pb2.EpisodeSummary],
          *, code: str = "", errors: list[common_pb2.SkillError] | None = None,
          curve: list[critic_pb2.CurvePoint] | None = None, start: list[common_pb2.ItemCount] | None = None,
          env_frames: int | None = None, frames: list[list[bytes]] | None = None, rl_config: str = "",
          after: list[str] | None = None) -> critic_pb2.Verdict:
    """The critic's verdict; without a critic (or in a setup without one), :func:`measured_verdict`. ``frames``:
    :func:`judge_frames`, sent within the critic's limit; ``rl_config``: an RL attempt's config in the fast agent's
    answer form, its macro actions' code included; ``after``: the chain's earlier sub-tasks an RL attempt's episodes
    start behind. Every size is cut to the critic's own limit (DescribeCritic)."""
    terms = critic_terms(ctx)
    if terms is None or not critic_judges(ctx):
        return measured_verdict(rollouts, errors or [],
                                terms.success_threshold if terms is not None else PASSING_RATE_WITHOUT_CRITIC)
    episodes = min(JUDGE_ROLLOUTS, terms.max_rollouts)
    response = ctx.stubs.critic.Judge(critic_pb2.JudgeRequest(
        subtask=st.name, description=st.description, success=list(st.success), rollouts=rollouts[:episodes],
        code=shortened_code(code, terms.max_code_bytes), errors=(errors or [])[:episodes],
        curve=(curve or [])[-min(JUDGE_CURVE_POINTS, terms.max_curve_points):], decision=str(decision),
        rules=ctx.describe.rules, start_inventory=start or [], frames=whole_episodes(frames or [], terms.max_frames),
        test_protocol=ctx.protocol.judge_text(str(decision), list(start or []), env_frames, after or ()),
        rl_config=rl_config, game=ctx.describe.display_name), timeout=ctx.stubs.judge_seconds)
    if response.llm_record:
        try:
            ctx.run.llm_call(record_from_json(response.llm_record), st.name)
        except ValueError as exc:  # a critic of another version: the verdict still counts
            log.warning("critic's LLM record of %s is unreadable: %s", st.name, exc)
    return response.verdict
