"""A game run's final controller (issue 36, item 2) over real gRPC with the real env server, a real learner
(Sample Factory, tiny budgets) and a scripted LLM (test double of the OpenAI-compatible server): after its
iterations a `crafter` run (1,000-frame episodes, so that tiny budgets hold its evaluations) trains both of the
paper's controllers on the game's own reward, APPO with the curriculum's coded skill as a macro action and RL around
the kept plan (configured by the fast agent, told how the plan's chain died), on the frames left split between
them, scores each on the iterations' worlds beside the best chain and keeps the highest; every frame is counted
within the budget; the second plan is told how the first evaluation's episodes died."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_game_run_served
from fakes.fake_openai import Reply
from test_game_run_served import serving_planner

from rlgpt.v1 import common_pb2, learner_pb2, planner_pb2
from services.planner import trainings

pytestmark = pytest.mark.timeout(900)
EPISODE, EPISODES, BUDGET = 1_000, 2, 16_000
EVALUATION = EPISODE * EPISODES
"""The frames one whole-task or policy evaluation keeps back."""
WAIT = "def skill(agent):\n    for _ in range(4):\n        yield 'noop'\n"
KEPT_PLAN = {"primitive_actions": ["noop", "move_left", "move_right", "move_up", "move_down", "do"],
             "macro_actions": [{"name": "wait_a_little", "description": "waits four frames", "code": WAIT}],
             "skill_max_steps": 16, "reward_terms": [{"kind": "death", "weight": -1.0}]}
"""The fast agent's config of RL around the kept plan (the scripted LLM's one more answer)."""
SCRIPTED = test_game_run_served.reply
"""The scripted LLM's other answers (the curriculum, the coded skill)."""


def reply(body: dict) -> Reply:
    if body["response_format"]["json_schema"]["name"] == "KeptPlanConfig":
        return Reply.json(KEPT_PLAN)
    return SCRIPTED(body)


def test_a_game_run_keeps_the_highest_of_the_chain_and_both_policies_on_the_games_reward(
        env_server, learner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trainings, "MIN_FRAMES", 2_000)  # tiny trainings: the test's time
    monkeypatch.setattr(test_game_run_served, "reply", reply)  # serving_planner's script, one more answer
    with serving_planner(env_server, tmp_path, learner=learner.target) as (stub, fake):
        run = stub.StartRun(planner_pb2.StartRunRequest(
            task=common_pb2.TaskSpec(name="crafter", episode_length=EPISODE), seed=6, agents="slow-fast",
            budgets=planner_pb2.Budgets(max_outer_iterations=2, eval_episodes=EPISODES, total_env_frames=BUDGET,
                                        target_success=0.9)))
        events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=800))
    run_dir = tmp_path / "runs" / run.run_id
    assert events[-1].WhichOneof("payload") == "run_end", events[-1]
    state = json.loads((run_dir / "state.json").read_text())
    macro, kept, final = state["game_controller"], state["kept_plan"] or {}, state["final"]
    assert macro.get("job_id") and kept.get("job_id"), (macro, kept)  # both trained (the old code: A only)
    jobs = {j.job_id: j.config for j in learner.stub.ListJobs(learner_pb2.ListJobsRequest()).jobs}
    # A: the primitives and the chain's coded skill as a macro action, the game's reward and episodes.
    a, b = jobs[macro["job_id"]], jobs[kept["job_id"]]
    assert macro["macro_actions"] == ["get_wood"] and [s.split("__")[0] for s in a.skills] == ["get_wood"]
    # B: the plan's coded step as one macro action, and the fast agent's config: its macro action, its reward term
    # after the game's; neither is paid the plan's stages.
    assert [step.skill.split("__")[0] for step in b.plan] == ["get_wood"]
    assert list(b.skills) == ["crafter__kept_plan__wait_a_little"] and b.skill_max_steps == 16
    assert kept["config_by"] == "fast agent" and kept["answer"]["macro_actions"][0]["code"] == WAIT
    assert b.plan_interrupt.damage  # the answer did not say: the game's default
    for config in (a, b):
        assert config.task.objective == "game" and config.episode_length == EPISODE
    assert [(t.kind, t.weight) for t in a.reward_terms] == [("native", 1.0)]
    assert [(t.kind, t.weight) for t in b.reward_terms] == [("native", 1.0), ("death", -1.0)]
    # The fast agent was told the game's terms: the score, how the best chain's episodes died, its rates.
    [told] = [r["messages"][0]["content"] for r in fake.requests
              if r["response_format"]["json_schema"]["name"] == "KeptPlanConfig"]
    best = next(it for it in state["iterations"] if it["iteration"] == state["best"]["iteration"])
    died = any(e["end_reason"] == "death" for e in best["failed"])
    assert "The task is the whole of the game Crafter: it has no success condition." in told
    assert ("Deaths in the whole game's last evaluation" in told and "by cause:" in told) == died
    assert f"Its score: {best['score']:.1f} (iteration {best['iteration']})" in told and "Success when" not in told
    assert len(list((run_dir / "llm").glob("*-crafter__kept_plan-fast.json"))) == 1  # recorded: a replay answers it
    # The split: A half of what the iterations left once the final and one evaluation are kept back, B the rest.
    iterations = sum(it["frames"] for it in state["iterations"])
    assert macro["env_frames"] == (BUDGET - iterations - 2 * EVALUATION) // 2
    assert kept["env_frames"] == BUDGET - iterations - macro["frames"] - 2 * EVALUATION
    # Both scored on the iterations' worlds beside the best chain; the highest is the final controller.
    [choice] = [e.final_controllers for e in events if e.WhichOneof("payload") == "final_controllers"]
    scores = {c.name: c.score for c in choice.controllers}
    assert list(scores) == ["chain", "macro actions", "kept plan"]
    assert scores["chain"] == pytest.approx(state["best"]["score"]) and macro["chain_score"] == state["best"]["score"]
    assert scores["macro actions"] == pytest.approx(macro["score"]) and scores["kept plan"] == pytest.approx(
        kept["score"])
    best = max(scores.values())
    assert choice.chosen == next(name for name, score in scores.items() if score == best)
    played = {"chain": "chain of coded skills", "macro actions": f"policy {macro['job_id']}: the game's reward",
              "kept plan": f"kept plan: the plan's chain with policy {kept['job_id']}"}
    assert final["controller"].startswith(played[choice.chosen])
    # Every frame counts, within the budget: each policy's training and evaluation among them.
    frames = {c.name: c.frames for c in choice.controllers}
    subtasks = state["subtasks"]
    assert frames["macro actions"] == subtasks["crafter__macro_actions"]["frames"] >= macro["env_frames"]
    assert frames["kept plan"] == subtasks["crafter__kept_plan"]["frames"] >= kept["env_frames"]
    assert state["frames_used"] == sum(s["frames"] for s in subtasks.values()) + state["evaluation_frames"]
    assert state["frames_used"] == events[-1].run_end.frames_used <= BUDGET
    report = (run_dir / "report.md").read_text()
    assert "| RL around the kept plan on the game's reward (steps get_wood; K=16) |" in report
    assert "| achievement | iteration 0 | iteration 1 | macro-action policy | kept-plan policy | final |" in report
    # The second plan was told how the first evaluation's episodes died (the real env server's causes).
    plans = [r["messages"][0]["content"] for r in fake.requests
             if r["response_format"]["json_schema"]["name"] == "Plan"]
    assert len(plans) == 2 and "Deaths in the whole game's last evaluation" in plans[1]
    assert "by cause:" in plans[1] and "keep the player alive" in plans[1]
