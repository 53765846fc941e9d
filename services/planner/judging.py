"""The verdict on an attempt: the critic's (told the episodes, frames of them, the code or config, the curve and the
protocol the agent read), or without a critic one from the measured success rate."""

from __future__ import annotations

import logging

from rlgpt.llm.client import record_from_json
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, planner_pb2
from services.planner.context import AgentSetup, RunContext
from services.planner.state import Decision

log = logging.getLogger(__name__)
PASSING_RATE = 0.5
"""Without a critic, the measured success rate at which a sub-task counts as solved."""
JUDGE_FRAMES_PER_EPISODE = 4
"""Frames asked for per test or evaluation episode when a critic judges (it looks at them where its
RLGPT_CRITIC_ATTACH_FRAMES is on): the first observation, two between, the last."""
JUDGE_MAX_FRAMES = 8
"""Most frames one Judge request carries: the critic's default max_frames (RLGPT_CRITIC_MAX_FRAMES)."""


def increasing(points: list[critic_pb2.CurvePoint]) -> list[critic_pb2.CurvePoint]:
    """Curve points with strictly increasing frames (the critic refuses repeats)."""
    out: list[critic_pb2.CurvePoint] = []
    for p in points:
        if not out or p.env_frames > out[-1].env_frames:
            out.append(p)
    return out


def measured_verdict(rollouts: list[common_pb2.EpisodeSummary],
                     errors: list[common_pb2.SkillError]) -> critic_pb2.Verdict:
    """The verdict without a critic: the agents only see the measured success rate and the first error."""
    rate = sum(e.success for e in rollouts) / len(rollouts) if rollouts else 0.0
    error = errors[0] if errors else None
    passed = rate >= PASSING_RATE
    return critic_pb2.Verdict(success=passed, success_rate=rate,
                              target=critic_pb2.TARGET_KEEP if passed else critic_pb2.TARGET_FAST,
                              diagnosis=f"success rate {rate:.0%}" + (f"; error {error.type}: {error.message}"
                                                                      if error else ""))


def judge_frames(episodes: list[common_pb2.EpisodeSummary], frames: list[env_pb2.EpisodeFrames]) -> list[bytes]:
    """Whole episodes' frames, failed episodes first (they carry the diagnosis), each episode's in step order,
    as many episodes as fit in :data:`JUDGE_MAX_FRAMES`."""
    order = sorted(range(min(len(episodes), len(frames))), key=lambda i: episodes[i].success)
    chosen: list[bytes] = []
    for i in order:
        if len(chosen) + len(frames[i].png) > JUDGE_MAX_FRAMES:
            break
        chosen.extend(frames[i].png)
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
          env_frames: int | None = None, frames: list[bytes] | None = None, rl_config: str = "") -> critic_pb2.Verdict:
    """The critic's verdict; without a critic (or in a setup without one), :func:`measured_verdict`.
    ``rl_config``: an RL attempt's config in the fast agent's answer form, its macro actions' code included."""
    if not critic_judges(ctx):
        return measured_verdict(rollouts, errors or [])
    response = ctx.stubs.critic.Judge(critic_pb2.JudgeRequest(
        subtask=st.name, description=st.description, success=list(st.success), rollouts=rollouts[:64],
        code=code[:60000], errors=(errors or [])[:64], curve=(curve or [])[-2000:], decision=str(decision),
        rules=ctx.describe.rules, start_inventory=start or [], frames=frames or [],
        test_protocol=ctx.protocol.judge_text(str(decision), list(start or []), env_frames),
        rl_config=rl_config), timeout=600)
    if response.llm_record:
        try:
            ctx.run.llm_call(record_from_json(response.llm_record), st.name)
        except ValueError as exc:  # a critic of another version: the verdict still counts
            log.warning("critic's LLM record of %s is unreadable: %s", st.name, exc)
    return response.verdict
