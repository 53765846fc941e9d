"""The whole game as a run's task, over real gRPC with the real env server and a scripted LLM (test double of the
OpenAI-compatible server), issue 36: StartRun("crafter") is resolved by the env server, the slow agent is asked for
a curriculum, every whole-task evaluation is measured by the game's score and the 22 achievements' rates, every
frame counts against the budget, and the report shows them; a budget below one evaluation and an unknown task are
refused."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.llm import LLMClient
from rlgpt.v1 import common_pb2, planner_pb2, planner_pb2_grpc
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.agents.slow import GAME_OBJECTIVE
from services.planner.servicer import SERVICE_NAME, PlannerServicer
from services.planner.settings import PlannerSettings

pytestmark = pytest.mark.timeout(600)
CURRICULUM = {"rationale": "wood first", "subtasks": [
    {"name": "get_wood", "description": "collect wood", "success": [{"achievement": "collect_wood"}],
     "decision": "code", "skills": []}]}
GAME = common_pb2.TaskSpec(name="crafter")


def reply(body: dict) -> Reply:
    name = body["response_format"]["json_schema"]["name"]
    if name == "SkillAnswer":
        return Reply.json({"name": "get_wood", "description": "chop", "code": COLLECT_WOOD})
    return Reply.json({"Plan": CURRICULUM}[name])


@contextlib.contextmanager
def serving_planner(env_server, tmp_path: Path, learner: str = "", keep_plan: bool = True
                    ) -> Iterator[tuple[planner_pb2_grpc.PlannerServiceStub, FakeOpenAIServer]]:
    """A planner on the env server (and ``learner``, an address, if given) with the scripted LLM; ``keep_plan``:
    PlannerSettings.keep_plan (RL around the kept plan)."""
    with FakeOpenAIServer([reply]) as fake:
        llm = LLMClient(LLMSettings(max_retries=0, timeout_seconds=10, model="scripted"), base_url=fake.base_url,
                        record_dir=tmp_path / "llm")
        settings = PlannerSettings(env_server=env_server.target, run_dir=str(tmp_path / "runs"), learner=learner,
                                   library_path=str(tmp_path / "library.json"), test_episodes=2, test_steps=150,
                                   skill_format="python", keep_plan=keep_plan)
        server, port = create_server("127.0.0.1:0", [ServiceBinding(
            SERVICE_NAME, planner_pb2_grpc.add_PlannerServiceServicer_to_server, PlannerServicer(settings, llm))])
        channel = create_channel(f"127.0.0.1:{port}", default_timeout=120, wait_ready_seconds=10)
        try:
            yield planner_pb2_grpc.PlannerServiceStub(channel), fake
        finally:
            channel.close()
            stop_server(server, 1)


@pytest.fixture
def planner(env_server, tmp_path) -> Iterator[tuple[planner_pb2_grpc.PlannerServiceStub, FakeOpenAIServer]]:
    with serving_planner(env_server, tmp_path) as served:
        yield served


def run_game(stub: planner_pb2_grpc.PlannerServiceStub, tmp_path: Path, *, seed: int, iterations: int,
             budget: int) -> tuple[list[planner_pb2.RunEvent], Path]:
    """A `crafter` run of 2 evaluation episodes (target a score of 90) watched to its end: its events (the last
    one its end) and its directory."""
    budgets = planner_pb2.Budgets(max_outer_iterations=iterations, eval_episodes=2, total_env_frames=budget,
                                  target_success=0.9)
    run = stub.StartRun(planner_pb2.StartRunRequest(task=GAME, seed=seed, agents="slow-fast", budgets=budgets))
    events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=800))
    assert events[-1].WhichOneof("payload") == "run_end", events[-1]
    return events, tmp_path / "runs" / run.run_id


def refused(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code().name, info.value.details()


def test_a_budget_below_one_evaluation_and_an_unknown_task_are_refused(planner) -> None:
    stub, _ = planner
    code, details = refused(lambda: stub.StartRun(planner_pb2.StartRunRequest(
        task=GAME, budgets=planner_pb2.Budgets(eval_episodes=2, total_env_frames=5000))))
    assert code == "INVALID_ARGUMENT" and "budgets.total_env_frames=5000 is less than one evaluation" in details
    assert "give at least 20000" in details
    code, details = refused(lambda: stub.StartRun(planner_pb2.StartRunRequest(
        task=common_pb2.TaskSpec(name="win_everything"))))
    assert code == "NOT_FOUND" and details.startswith("no task 'win_everything' on crafter: crafter offers crafter")


def test_a_run_on_the_whole_game_is_scored_and_counts_every_frame(planner, tmp_path: Path) -> None:
    stub, fake = planner
    budget = 60_000
    events, run_dir = run_game(stub, tmp_path, seed=4, iterations=2, budget=budget)
    end = events[-1]
    request = json.loads((run_dir / "request.json").read_text())
    assert request["task"]["objective"] == "game" and request["task"]["episodeLength"] == 10000
    state = json.loads((run_dir / "state.json").read_text())
    iterations, final = state["iterations"], state["final"]
    assert len(iterations) == 2 and all(len(it["achievement_rates"]) == 22 for it in iterations)
    assert iterations[0]["achievement_rates"]["collect_wood"] == 100.0  # the curriculum's skill in every episode
    assert final["score"] > 0 and final["success_rate"] == 0.0 and end.run_end.score == pytest.approx(final["score"])
    assert state["stop_reason"] == "its 2 outer iterations are spent, below its target of a score of 90.0"
    assert iterations[0]["verdict"]["diagnosis"].startswith("The whole game scored 0.2 in its evaluation (target 90.0)")
    # Episodes last as the benchmark's: the plan done, the player idles on until it dies.
    assert iterations[0]["failed"] and all(e["end_reason"] == "death" for e in iterations[0]["failed"])
    # Every frame counts: the skill tests and the three whole-task evaluations, within the budget.
    assert 0 < state["evaluation_frames"] < state["frames_used"] == end.run_end.frames_used <= budget
    assert sum(it["frames"] for it in iterations) <= state["frames_used"] and state["frame_budget"] == budget
    iteration_ends = [e.iteration_end for e in events if e.WhichOneof("payload") == "iteration_end"]
    assert [e.score for e in iteration_ends] == pytest.approx([it["score"] for it in iterations])
    plans = [r["messages"][0]["content"] for r in fake.requests
             if r["response_format"]["json_schema"]["name"] == "Plan"]
    assert plans and GAME_OBJECTIVE in plans[0]
    report = (run_dir / "report.md").read_text()
    assert f"- final score: **{final['score']:.1f}** over 2 episodes" in report
    assert "## The game's achievements" in report and "| collect_wood | 100.0% |" in report
    assert f"{state['frames_used']:,} of {budget:,}" in report
