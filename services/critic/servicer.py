"""``rlgpt.v1.CriticService``: validates a JudgeRequest at the edge, then asks the Judge for a verdict."""

from __future__ import annotations

import json
import logging
import math
import time

import grpc

from rlgpt import metrics
from rlgpt.errors import InvalidArgument, grpc_errors
from rlgpt.llm.client import record_json
from rlgpt.prompts import CompletesJSON
from rlgpt.v1 import critic_pb2, critic_pb2_grpc
from services.critic import judge
from services.critic.judge import DECISIONS, TARGET_NAMES
from services.critic.settings import CriticSettings

log = logging.getLogger(__name__)
SERVICE_NAME = critic_pb2.DESCRIPTOR.services_by_name["CriticService"].full_name
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def rl_config_problems(text: str, max_bytes: int) -> list[str]:
    """What is wrong with a JudgeRequest's rl_config: too large, or not a JSON object (its start shown)."""
    if not text:
        return []
    size = len(text.encode())
    if size > max_bytes:
        return [f"rl_config: {size} bytes, at most {max_bytes}"]
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        return [f"rl_config: not JSON ({exc}); it starts {text[:40]!r}"]
    return [] if isinstance(parsed, dict) else [f"rl_config: a JSON object is needed, not {type(parsed).__name__}"]


class CriticServicer(critic_pb2_grpc.CriticServiceServicer):
    """Stateless: every Judge is independent, so calls may run concurrently."""

    def __init__(self, settings: CriticSettings, llm: CompletesJSON | None = None):
        self.settings = settings
        self.critic = judge.Judge(settings, llm)
        for outcome in ("success", "failure"):
            for target in TARGET_NAMES.values():
                # Every series exists at 0 from the start, so rate() and increase() see the first verdict too.
                metrics.CRITIC_VERDICTS.labels(outcome, target)

    def _validate(self, request: critic_pb2.JudgeRequest) -> None:
        """Raises InvalidArgument listing every problem of the request."""
        s = self.settings
        problems = []
        if not request.subtask.strip():
            problems.append("subtask: must name the sub-task being judged")
        if request.decision not in DECISIONS:
            problems.append(f"decision={request.decision[:40]!r}: must be 'code', 'rl' or empty")
        if len(request.rollouts) > s.max_rollouts:
            problems.append(f"rollouts: {len(request.rollouts)} given, at most {s.max_rollouts}")
        if len(request.errors) > s.max_rollouts:
            problems.append(f"errors: {len(request.errors)} given, at most {s.max_rollouts}")
        bad_steps = [i for i, r in enumerate(request.rollouts) if r.steps < 0 or not math.isfinite(r.episode_return)]
        if bad_steps:
            problems.append(f"rollouts{bad_steps[:5]}: steps must be >= 0 and episode_return finite")
        code_bytes = len(request.code.encode())
        if code_bytes > s.max_code_bytes:
            problems.append(f"code: {code_bytes} bytes, at most {s.max_code_bytes}")
        problems.extend(rl_config_problems(request.rl_config, s.max_code_bytes))
        if len(request.frames) > s.max_frames:
            problems.append(f"frames: {len(request.frames)} given, at most {s.max_frames}")
        for i, frame in enumerate(request.frames[: s.max_frames + 1]):
            if len(frame) > s.max_frame_bytes:
                problems.append(f"frames[{i}]: {len(frame)} bytes, at most {s.max_frame_bytes}")
            elif not frame.startswith(PNG_SIGNATURE):
                problems.append(f"frames[{i}]: not a PNG image (frames must be PNG bytes)")
        problems.extend(self._curve_problems(request))
        if problems:
            raise InvalidArgument("; ".join(problems))

    def _curve_problems(self, request: critic_pb2.JudgeRequest) -> list[str]:
        curve = request.curve
        if len(curve) > self.settings.max_curve_points:
            return [f"curve: {len(curve)} points, at most {self.settings.max_curve_points}"]
        problems = []
        for i, p in enumerate(curve):
            if not (0.0 <= p.success_rate <= 1.0) or not math.isfinite(p.mean_return) or p.env_frames < 0:
                problems.append(f"curve[{i}]: success_rate must be in 0..1, mean_return finite, env_frames >= 0")
                break
            if i and p.env_frames < curve[i - 1].env_frames:
                problems.append(f"curve[{i}]: env_frames {p.env_frames} < {curve[i - 1].env_frames}; "
                                "points must be ordered by env_frames")
                break
        return problems

    @grpc_errors
    def Judge(self, request: critic_pb2.JudgeRequest, context: grpc.ServicerContext) -> critic_pb2.JudgeResponse:
        self._validate(request)
        start = time.perf_counter()
        verdict, record = self.critic.judge_with_record(request)
        metrics.CRITIC_JUDGE_SECONDS.observe(time.perf_counter() - start)
        metrics.CRITIC_VERDICTS.labels("success" if verdict.success else "failure",
                                       TARGET_NAMES[verdict.target]).inc()
        log.info("judged %s: success=%s rate=%.2f target=%s findings=%d", request.subtask, verdict.success,
                 verdict.success_rate, TARGET_NAMES[verdict.target], len(verdict.findings))
        return critic_pb2.JudgeResponse(verdict=verdict, llm_record=record_json(record) if record else "")

    @grpc_errors
    def DescribeCritic(self, request: critic_pb2.DescribeCriticRequest, context: grpc.ServicerContext
                       ) -> critic_pb2.DescribeCriticResponse:
        s = self.settings
        return critic_pb2.DescribeCriticResponse(
            success_threshold=s.success_threshold, max_rollouts=s.max_rollouts, max_code_bytes=s.max_code_bytes,
            max_frames=s.max_frames, max_frame_bytes=s.max_frame_bytes, max_curve_points=s.max_curve_points)
