"""Every deadline the planner and the CLI give a call to another service comes from :mod:`rlgpt.deadlines`, derived
from the settings that bound the work behind the call: the critic gets as long as its LLM call may take (a relay's
1800 s timeout, not a fixed 600 s), a call that steps frames as long as its frames take at the slowest rate."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from fakes.fake_learner import FakeLearner

from rlgpt.config import LLMSettings
from rlgpt.deadlines import START_SECONDS, frames_seconds, judge_seconds, training_seconds
from rlgpt.llm.retries import longest_call_seconds, retry_delays
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner.attempts import Attempts
from services.planner.context import RunContext, Stubs
from services.planner.controller import final_evaluation
from services.planner.judging import judge
from services.planner.runs import Run
from services.planner.servicer import PlannerServicer
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import Decision, RunState, Status, SubTaskState

ROOT = Path(__file__).resolve().parents[3]
RELAY = LLMSettings(timeout_seconds=1800.0)
"""The LLM settings the README gives the relay (a capable model answering by files)."""
WOOD = planner_pb2.SubTask(name="wood", success=[common_pb2.Condition(achievement="collect_wood")])


class Recorder:
    """A test double of the env server and the critic that keeps each call's deadline."""

    def __init__(self) -> None:
        self.deadlines: dict[str, float | None] = {}

    def __getattr__(self, rpc: str) -> Any:
        answers = {"DescribeCritic": critic_pb2.DescribeCriticResponse(
                       success_threshold=0.8, max_rollouts=64, max_code_bytes=65536, max_frames=8,
                       max_curve_points=100),
                   "Judge": critic_pb2.JudgeResponse(verdict=critic_pb2.Verdict(target=critic_pb2.TARGET_FAST)),
                   "RegisterSkill": env_pb2.RegisterSkillResponse(), "RunSkill": env_pb2.RunSkillResponse()}

        def call(request: Any, timeout: float | None = None) -> Any:
            self.deadlines[rpc] = timeout
            return answers[rpc]
        return call


def context(tmp_path: Path, stubs: Stubs, **settings: Any) -> RunContext:
    run = Run(tmp_path / "run", planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="wood")))
    return RunContext.create(run, RunState(), env_pb2.DescribeResponse(backend="crafter"), stubs,
                             SkillLibrary(tmp_path / "library.json"), PlannerSettings(**settings))


def test_the_critic_gets_as_long_as_its_llm_call_may_take() -> None:
    # An answer, a repair, each up to 5 requests of 1800 s and the backoff between them: the critic's whole call.
    assert longest_call_seconds(RELAY) == 2 * (5 * 1800.0 + sum(retry_delays(RELAY)))
    assert retry_delays(LLMSettings(backoff_seconds=1.0, max_retries=7)) == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert judge_seconds(RELAY) == START_SECONDS + longest_call_seconds(RELAY) > 10.5 * 60  # the answer that paused
    assert judge_seconds(LLMSettings(timeout_seconds=10.0, max_retries=0)) == START_SECONDS + 20.0


def test_the_planner_asks_the_critic_with_the_deadline_of_its_llm_settings(tmp_path: Path) -> None:
    critic = Recorder()
    ctx = context(tmp_path, Stubs(env=None, learner=None, critic=critic, judge_seconds=judge_seconds(RELAY)))
    judge(ctx, WOOD, Decision.CODE, [common_pb2.EpisodeSummary(success=False)])
    assert critic.deadlines["Judge"] == judge_seconds(RELAY)
    servicer = PlannerServicer(PlannerSettings(critic="127.0.0.1:1", run_dir=str(tmp_path)), None,
                               llm_settings=RELAY)
    try:
        assert servicer.judge_seconds == judge_seconds(RELAY)  # what every run's Stubs carry
    finally:
        servicer.close()


def test_the_chain_s_evaluation_gets_as_long_as_its_episodes_take(tmp_path: Path) -> None:
    env = Recorder()
    ctx = context(tmp_path, Stubs(env=env, learner=None, critic=None), final_episode_frames=10000, eval_episodes=64)
    ctx.state.set_plan(planner_pb2.Plan(subtasks=[WOOD]))
    ctx.state.subtasks["wood"] = SubTaskState(name="wood", status=Status.DONE, skill_code="def skill(agent): ...")
    final_evaluation(ctx)
    assert env.deadlines["RunSkill"] == frames_seconds(64 * 10000) > 3600  # 640,000 frames at the slowest rate


class TimedLearner(FakeLearner):
    """The learner's test double, keeping each call's deadline."""

    def __init__(self) -> None:
        super().__init__()
        self.deadlines: dict[str, float] = {}

    def WatchJob(self, request: learner_pb2.WatchJobRequest, timeout: float) -> list[learner_pb2.JobProgress]:
        self.deadlines["WatchJob"] = timeout
        return super().WatchJob(request, timeout)

    def Evaluate(self, request: learner_pb2.EvaluateRequest, timeout: float) -> learner_pb2.EvaluateResponse:
        self.deadlines["Evaluate"] = timeout
        return super().Evaluate(request, timeout)


def test_a_training_is_watched_as_long_as_its_frames_take_and_its_policy_evaluated_as_its_episodes(
        tmp_path: Path) -> None:
    learner = TimedLearner()
    ctx = context(tmp_path, Stubs(env=None, learner=learner, critic=None), eval_episodes=32)
    config = learner_pb2.RLConfig(task=common_pb2.TaskSpec(name="wood"), env_frames=1_000_000, episode_length=5000)
    Attempts(ctx, None).train(WOOD, SubTaskState(name="wood", decision="rl"), config)
    assert learner.deadlines["WatchJob"] == training_seconds(1_000_000) > 24 * 3600  # a bench-crafter budget
    assert learner.deadlines["Evaluate"] == frames_seconds(32 * 5000)  # the job's episodes, its config's length


def _typed_deadlines(path: Path) -> list[str]:
    """``timeout=`` / ``default_timeout=`` of calls in ``path`` given as a number rather than from
    rlgpt.deadlines (a thread's or a process's own wait is no deadline between services)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if func in ("wait", "join", "acquire"):
            continue
        for keyword in node.keywords:
            if keyword.arg in ("timeout", "default_timeout") and any(
                    isinstance(n, ast.Constant) and isinstance(n.value, (int, float))
                    for n in ast.walk(keyword.value)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_call_site_types_a_deadline() -> None:
    files = [*(ROOT / "services" / "planner").rglob("*.py"), *(ROOT / "rlgpt" / "app").glob("*.py")]
    assert [where for path in sorted(files) for where in _typed_deadlines(path)] == []
