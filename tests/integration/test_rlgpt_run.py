"""`rlgpt run` end to end: the four real services on loopback, a scripted LLM (OpenAI-compatible test double),
tiny budgets. The loops code one sub-task, train the others with the coded skill in their action space, the
critic judges, the task-level controller evaluates, and the report has its plots (the session's shared run
``mixed_run``, which test_rlgpt_method reads too); bad requests are refused; a run whose learner or env server
is killed mid-training resumes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.app.runner import RunOptions, run_rlgpt
from rlgpt.errors import FailedPrecondition, InvalidArgument
from services.env_server.skills.reference import COLLECT_WOOD

pytestmark = pytest.mark.timeout(900)
PLAN = {"rationale": "wood by code, the table by RL", "subtasks": [
    {"name": "get_wood", "description": "collect wood", "success": [{"item": "wood", "count": 2}],
     "decision": "code", "skills": []},
    {"name": "table", "description": "place a crafting table", "success": [{"achievement": "place_table"}],
     "decision": "rl", "skills": []}]}
RL = {"primitive_actions": ["noop", "do", "move_left", "move_right", "move_up", "move_down", "place_table"],
      "skills": [], "skill_max_steps": 1, "reward_terms": [{"kind": "success", "target": "", "weight": 5}],
      "episode_length": 200}
VERDICT = {"success": False, "diagnosis": "scripted critic", "suggestion": "keep going", "target": "fast"}


def scripted(body: dict) -> Reply:
    name = body["response_format"]["json_schema"]["name"]
    answers = {"Plan": PLAN, "SkillAnswer": {"name": "get_wood", "description": "chop", "code": COLLECT_WOOD},
               "RLConfig": RL, "CriticAnswer": VERDICT}
    return Reply.json(answers[name])


def options(tmp_path: Path, **overrides) -> RunOptions:
    fields = dict(task="place_table", success="", mode="rl-gpt", agents="slow-fast-critic", resume=None,
                  runs_dir=tmp_path / "runs", outer=1, inner=1, frames_per_training=1500, total_frames=6000,
                  eval_episodes=2, candidates=1, seed=0)
    fields.update(overrides)
    return RunOptions(**fields)


def test_rlgpt_run_with_all_services(mixed_run) -> None:
    report, state, run_dir = mixed_run.report, mixed_run.state, mixed_run.report.parent
    assert state["subtasks"]["get_wood"]["status"] == "done"
    table = state["subtasks"]["table"]
    assert table["decision"] == "rl" and table["job_id"] and table["curve"]
    pickaxe = state["subtasks"]["pickaxe"]["job_id"]
    # The long-horizon controller chains the coded skill and the trained policies.
    assert state["final"]["controller"] == (f"chain: get_wood (code) -> table (policy {table['job_id']}) -> "
                                            f"pickaxe (policy {pickaxe})")
    assert [link["name"] for link in state["final"]["links"]] == ["get_wood", "table", "pickaxe"]
    assert 0.0 <= state["final"]["success_rate"] <= 1.0
    assert state["frames_used"] >= 1500
    config = mixed_run.job_file(table["job_id"])
    assert "get_wood" in config["config"]["skills"]  # the coded skill joined the RL action space
    # The training's rollout workers were given both env servers the run started (one session on each).
    assert len(set(config["env_servers"])) == 2 and config["env_server"] in config["env_servers"]
    text = report.read_text()
    assert "## Sub-tasks" in text and "curves.png" in text
    assert (run_dir / "curves.png").stat().st_size > 1000 and (run_dir / "iterations.png").exists()
    kinds = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert any("verdict" in k for k in kinds) and any("training" in k for k in kinds) and "runEnd" in kinds[-1]
    # Every LLM call of the run, the critic's too, is in its llm/ folder, named by iteration and sub-task.
    records = sorted((run_dir / "llm").glob("*.json"))
    assert {json.loads(p.read_text())["agent"] for p in records} == {"slow", "fast", "critic"}
    assert any(p.name.endswith("-iter0-table-critic.json") for p in records)
    calls = [k["llm"] for k in kinds if "llm" in k]
    assert sorted(Path(c["record"]).name for c in calls) == sorted(p.name for p in records)
    assert state["iterations"][0]["tokens"] == sum(int(c["promptTokens"]) + int(c["completionTokens"]) for c in calls)


def test_unknown_task_and_zero_budget_are_refused(cluster, tmp_path) -> None:
    # The planner refuses them at StartRun: asked of the session's running planner instead of services started
    # for each request.
    with pytest.raises(InvalidArgument, match="NOT_FOUND: no task 'fly_to_the_moon' on crafter"):
        run_rlgpt(options(tmp_path, task="fly_to_the_moon", planner=cluster.target))
    with pytest.raises(InvalidArgument, match="frames"):
        run_rlgpt(options(tmp_path, mode="pure-rl", frames_per_training=0, total_frames=0, planner=cluster.target))


def test_resume_of_a_missing_run_dir(tmp_path) -> None:
    with pytest.raises(FailedPrecondition, match="not a run directory"):
        run_rlgpt(options(tmp_path, resume=tmp_path / "nope"))


def _processes_mentioning(text: str) -> list[int]:
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if any(text in part for part in (proc.info["cmdline"] or [])):
            found.append(proc.info["pid"])
    return found


@pytest.mark.parametrize("killed", ["learner", "env"])
def test_service_killed_mid_run_then_resume_continues(killed: str, tmp_path, monkeypatch) -> None:
    from rlgpt.app.runner import local_services, task_spec
    from rlgpt.grpc_client import create_channel
    from rlgpt.v1 import planner_pb2, planner_pb2_grpc

    with FakeOpenAIServer([scripted]) as llm:
        monkeypatch.setenv("RLGPT_LLM_BASE_URL", llm.base_url)
        monkeypatch.setenv("RLGPT_LLM_MODEL", "scripted")
        opts = options(tmp_path, frames_per_training=200_000, total_frames=0)
        opts.runs_dir.mkdir(parents=True)
        with local_services(opts, opts.runs_dir / "logs") as services:
            stub = planner_pb2_grpc.PlannerServiceStub(create_channel(services["planner"].target,
                                                                      wait_ready_seconds=30))
            run = stub.StartRun(planner_pb2.StartRunRequest(
                task=task_spec("place_table", ""), budgets=planner_pb2.Budgets(
                    max_outer_iterations=1, max_inner_iterations=1, env_frames_per_training=200_000,
                    eval_episodes=2)))
            events = []
            for event in stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=600):
                events.append(event)
                if event.WhichOneof("payload") == "training" and event.training.env_frames > 0:
                    services[killed].process.kill()  # the learner or the env server dies mid-training
            assert events[-1].WhichOneof("payload") == "error" and events[-1].error.resumable
            assert "resume" in events[-1].error.message
        run_dir = Path(run.run_dir)
        state = json.loads((run_dir / "state.json").read_text())
        assert state["subtasks"]["get_wood"]["status"] == "done" and state["subtasks"]["table"]["job_id"]
        # The training job ended itself (dead learner) or was failed by the learner (dead env server): no orphans.
        job = state["subtasks"]["table"]["job_id"]
        deadline = time.monotonic() + 90  # its self-watch notices within seconds; stopping gets stop_grace (20 s)
        while time.monotonic() < deadline and _processes_mentioning(job):
            time.sleep(0.5)
        assert not _processes_mentioning(job)
        # Resume with a small budget: the coded sub-task is not redone, the RL one trains again and the run ends.
        data = json.loads((run_dir / "request.json").read_text())
        data["budgets"]["envFramesPerTraining"] = "1500"
        (run_dir / "request.json").write_text(json.dumps(data))
        report = run_rlgpt(options(tmp_path, resume=run_dir))
    state = json.loads((run_dir / "state.json").read_text())
    assert state["finished"] and state["final"]["controller"].startswith("chain: get_wood (code) -> table (policy")
    assert len([t for t in state["subtasks"]["get_wood"]["tests"] if t["kind"] == "code"]) == 1  # not redone
    assert report.exists()
