"""The paper's final controller on the whole game (issue 36, item 2), over real gRPC with the real env server and
a real learner (Sample Factory, a tiny budget) and a scripted LLM (test double of the OpenAI-compatible server):
after its iterations a `crafter` run trains APPO on the game's own reward with the plan's coded skill as a macro
action, scores it on the iterations' worlds beside the best chain, keeps the higher as the final controller, and
counts every frame against the budget. RL around the kept plan (B) is off here: test_game_final_served.py trains
both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_game_run_served import run_game, serving_planner

from rlgpt.v1 import learner_pb2

pytestmark = pytest.mark.timeout(900)


def test_a_game_run_trains_its_coded_skills_as_macro_actions_on_the_games_reward(env_server, learner,
                                                                                  tmp_path: Path) -> None:
    budget = 50_000
    with serving_planner(env_server, tmp_path, learner=learner.target, keep_plan=False) as (stub, _):
        events, run_dir = run_game(stub, tmp_path, seed=5, iterations=1, budget=budget)
    end = events[-1]
    state = json.loads((run_dir / "state.json").read_text())
    macro, best, final = state["game_controller"], state["best"], state["final"]
    assert not macro.get("error"), macro
    assert macro["macro_actions"] == ["get_wood"] and macro["chain_score"] == pytest.approx(best["score"])
    # Trained on the game's reward and episodes, the chain's skill in its action space, on the frames left.
    job = next(j for j in learner.stub.ListJobs(learner_pb2.ListJobsRequest()).jobs if j.job_id == macro["job_id"])
    assert job.config.task.objective == "game" and job.config.episode_length == 10_000
    assert len(job.config.skills) == 1 and job.config.skills[0].startswith("get_wood__chain")
    assert [t.kind for t in job.config.reward_terms] and macro["env_frames"] >= 5_000
    assert len(macro["achievement_rates"]) == 22 and macro["score"] >= 0.0
    # The higher scorer on the same worlds is the final controller.
    if macro["score"] > macro["chain_score"]:
        assert final["controller"].startswith(f"policy {macro['job_id']}")
    else:
        assert final["controller"] == "chain of coded skills"
    # Every frame counts: the training, its evaluation, the chain's tests and evaluations, within the budget.
    assert state["frames_used"] == end.run_end.frames_used <= budget
    assert state["subtasks"]["crafter__macro_actions"]["frames"] >= macro["env_frames"] * 0.9
    report = (run_dir / "report.md").read_text()
    assert "APPO on the game's reward with the primitives and the plan's coded skills as macro actions" in report
    assert "| achievement | iteration 0 | macro-action policy | final |" in report
