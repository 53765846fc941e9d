"""``rlgpt.v1.CriticService``: validates a JudgeRequest or a JudgeTaskRequest at the edge, then asks the Judge or
the TaskJudge for a verdict.

Every request is first sized by the critic's limits (:mod:`services.critic.limits`, served by DescribeCritic:
rollouts, episodes, frames, curve points and links counted, texts and frames bounded), before the servicer sees it;
the servicer checks what the values mean.
"""

from __future__ import annotations

import json
import logging
import math
import time

import grpc

from rlgpt import metrics
from rlgpt.errors import MAX_REFUSAL_BYTES, InvalidArgument, grpc_errors, join_problems, shown
from rlgpt.llm.client import record_json
from rlgpt.prompts import CompletesJSON
from rlgpt.v1 import common_pb2, critic_pb2, critic_pb2_grpc
from services.critic import judge
from services.critic.judge import DECISIONS, TARGET_NAMES
from services.critic.limits import critic_limits
from services.critic.settings import CriticSettings
from services.critic.task_judge import TaskJudge

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
    except RecursionError:
        return [f"rl_config: nested too deeply to read; it starts {text[:40]!r}"]
    return [] if isinstance(parsed, dict) else [f"rl_config: a JSON object is needed, not {type(parsed).__name__}"]


def episode_problems(field: str, episodes: list[common_pb2.EpisodeSummary]) -> list[str]:
    """Episodes with negative steps or a return that is not finite (the first five named)."""
    bad = [i for i, r in enumerate(episodes) if r.steps < 0 or not math.isfinite(r.episode_return)]
    return [f"{field}{bad[:5]}: steps must be >= 0 and episode_return finite"] if bad else []


def link_problems(links: list[critic_pb2.TaskLink]) -> list[str]:
    """What is wrong with a JudgeTaskRequest's links (names, decisions, counts, rates)."""
    problems, seen = [], set()
    for i, link in enumerate(links):
        name = link.subtask.strip()
        if not name:
            problems.append(f"links[{i}].subtask: must name the link's sub-task")
        elif name in seen:
            problems.append(f"links[{i}].subtask={name[:40]!r}: an earlier link has the same name")
        seen.add(name)
        if link.decision not in DECISIONS:
            problems.append(f"links[{i}].decision={link.decision[:40]!r}: must be 'code', 'rl' or empty")
        if not 0 <= link.succeeded <= link.reached:
            problems.append(f"links[{i}]: reached={link.reached} succeeded={link.succeeded}: must be "
                            "0 <= succeeded <= reached")
        if link.mean_frames != -1 and not (math.isfinite(link.mean_frames) and link.mean_frames >= 0):
            problems.append(f"links[{i}].mean_frames={link.mean_frames:.6g}: must be >= 0, or -1 (not known)")
        own = link.own_success_rate
        if own != -1 and not 0 <= own <= 1:  # NaN fails both
            problems.append(f"links[{i}].own_success_rate={own:.6g}: must be in 0..1, or -1 (not measured)")
    return problems


class CriticServicer(critic_pb2_grpc.CriticServiceServicer):
    """Stateless: every Judge is independent, so calls may run concurrently."""

    def __init__(self, settings: CriticSettings, llm: CompletesJSON | None = None):
        self.settings = settings
        self.critic = judge.Judge(settings, llm)
        self.task_critic = TaskJudge(settings, llm)
        self.request_limits = critic_limits(settings)
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
        problems.extend(episode_problems("rollouts", list(request.rollouts)))
        code_bytes = len(request.code.encode())
        if code_bytes > s.max_code_bytes:
            problems.append(f"code: {code_bytes} bytes, at most {s.max_code_bytes}")
        problems.extend(rl_config_problems(request.rl_config, s.max_code_bytes))
        for i, frame in enumerate(request.frames):
            if not frame.startswith(PNG_SIGNATURE):
                problems.append(f"frames[{i}]: not a PNG image (frames must be PNG bytes)")
        problems.extend(self._curve_problems(request))
        if problems:
            raise InvalidArgument(join_problems(problems, max_bytes=MAX_REFUSAL_BYTES))

    def _curve_problems(self, request: critic_pb2.JudgeRequest) -> list[str]:
        curve = request.curve
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

    def _validate_task(self, request: critic_pb2.JudgeTaskRequest) -> None:
        """Raises InvalidArgument listing every problem of a whole-task request."""
        problems = []
        if not request.task.strip():
            problems.append("task: must name the task being judged")
        target = request.target_success
        if not 0 <= target <= 1:  # NaN fails too
            problems.append(f"target_success={target:.6g}: must be in 0..1")
        if request.iteration < 0:
            problems.append(f"iteration={request.iteration}: must be >= 0")
        if request.HasField("score") and not 0 <= request.score <= 100:  # NaN fails too
            problems.append(f"score={request.score:.6g}: must be in 0..100 (the game's score, percent)")
        problems.extend(f"achievement_rates[{shown(name)}]={rate:.6g}: must be in 0..100 (percent)"
                        for name, rate in request.achievement_rates.items() if not 0 <= rate <= 100)
        if request.achievement_rates and not request.HasField("score"):
            problems.append("achievement_rates: given without a score; send the evaluation's score with them")
        problems.extend(link_problems(list(request.links)))
        problems.extend(episode_problems("episodes", list(request.episodes)))
        if problems:
            raise InvalidArgument(join_problems(problems, max_bytes=MAX_REFUSAL_BYTES))

    @grpc_errors
    def JudgeTask(self, request: critic_pb2.JudgeTaskRequest, context: grpc.ServicerContext
                  ) -> critic_pb2.JudgeResponse:
        self._validate_task(request)
        verdict, record = self.task_critic.judge_with_record(request)
        log.info("judged the task %s: success=%s rate=%.2f target=%s subtask=%s findings=%d", request.task,
                 verdict.success, verdict.success_rate, TARGET_NAMES[verdict.target], verdict.subtask or "-",
                 len(verdict.findings))
        return critic_pb2.JudgeResponse(verdict=verdict, llm_record=record_json(record) if record else "")

    @grpc_errors
    def DescribeCritic(self, request: critic_pb2.DescribeCriticRequest, context: grpc.ServicerContext
                       ) -> critic_pb2.DescribeCriticResponse:
        s = self.settings
        return critic_pb2.DescribeCriticResponse(
            success_threshold=s.success_threshold, max_rollouts=s.max_rollouts, max_code_bytes=s.max_code_bytes,
            max_frames=s.max_frames, max_frame_bytes=s.max_frame_bytes, max_curve_points=s.max_curve_points,
            requests=self.request_limits.to_proto())
