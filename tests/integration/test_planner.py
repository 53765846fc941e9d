"""The PlannerService over real gRPC, with the real env server and a test double of the LLM server."""

from __future__ import annotations

import base64
import io
import json
import threading

import grpc
import PIL.Image
import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply

from rlgpt.config import LLMSettings
from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.llm import LLMClient
from rlgpt.v1 import common_pb2, critic_pb2, critic_pb2_grpc, env_pb2, planner_pb2, planner_pb2_grpc
from services.critic.servicer import SERVICE_NAME as CRITIC_SERVICE
from services.critic.servicer import CriticServicer
from services.critic.settings import CriticSettings
from services.env_server.skills.reference import COLLECT_WOOD
from services.planner.servicer import SERVICE_NAME, PlannerServicer
from services.planner.settings import PlannerSettings

PLAN = {"rationale": "wood, then a cow", "subtasks": [
    {"name": "get_wood", "description": "collect wood", "success": [{"achievement": "collect_wood"}],
     "decision": "code", "skills": []},
    {"name": "eat_beef", "description": "eat a cow", "success": [{"achievement": "eat_cow"}], "decision": "rl",
     "skills": []}]}
SKILL = {"name": "get_wood", "description": "chop", "code": COLLECT_WOOD}
RL = {"primitive_actions": ["noop", "do", "move_left", "move_right", "move_up", "move_down"], "skills": [],
      "skill_max_steps": 1, "reward_terms": [{"kind": "success", "target": "", "weight": 1}], "episode_length": 400}


def by_schema(body: dict) -> Reply:
    """Answers by which schema the agent asked for, like a model would."""
    name = body["response_format"]["json_schema"]["name"]
    return Reply.json({"Plan": PLAN, "SkillAnswer": SKILL, "RLConfig": RL}[name])


@pytest.fixture
def planner(env_server, tmp_path):
    def start(script, critic: str = "", **extra):
        fake = FakeOpenAIServer(script).__enter__()
        llm = LLMClient(LLMSettings(max_retries=1, backoff_seconds=0.01, timeout_seconds=5, model="scripted"),
                        base_url=fake.base_url, record_dir=tmp_path / "llm")
        settings = PlannerSettings(env_server=env_server.target, run_dir=str(tmp_path / "runs"),
                                   library_path=str(tmp_path / "library.json"), test_episodes=2, test_steps=150,
                                   critic=critic, **{"eval_episodes": 4, **extra})
        servicer = PlannerServicer(settings, llm)
        server, port = create_server("127.0.0.1:0", [
            ServiceBinding(SERVICE_NAME, planner_pb2_grpc.add_PlannerServiceServicer_to_server, servicer)])
        channel = create_channel(f"127.0.0.1:{port}", default_timeout=120, wait_ready_seconds=10)
        started.append((fake, server, channel))
        return planner_pb2_grpc.PlannerServiceStub(channel)

    started: list = []
    yield start
    for fake, server, channel in started:
        channel.close()
        stop_server(server, 1)
        fake.__exit__(None)


CODE_PLAN = {"rationale": "wood is one coded step", "subtasks": [PLAN["subtasks"][0]]}


def code_only(body: dict) -> Reply:
    name = body["response_format"]["json_schema"]["name"]
    return Reply.json({"Plan": CODE_PLAN, "SkillAnswer": SKILL}[name])


def _report(stub: planner_pb2_grpc.PlannerServiceStub, run_id: str) -> dict[str, bytes]:
    """The run's report files by name, in the order GetRunReport sent them."""
    files: dict[str, bytes] = {}
    for chunk in stub.GetRunReport(planner_pb2.GetRunReportRequest(run_id=run_id), timeout=60):
        assert chunk.offset == len(files.get(chunk.name, b""))
        files[chunk.name] = files.get(chunk.name, b"") + chunk.content
    return files


def _stop(stub: planner_pb2_grpc.PlannerServiceStub, run_id: str) -> None:
    """Stops a run and waits for its end: no call of its thread is under way when the test's servers go."""
    stub.StopRun(planner_pb2.StopRunRequest(run_id=run_id))
    list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run_id), timeout=120))

def test_code_run_iterates_judges_and_evaluates_the_chain(planner, tmp_path) -> None:
    stub = planner([code_only])
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"), seed=2,
                                                    budgets=planner_pb2.Budgets(eval_episodes=3)))
    events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=300))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[:2] == ["llm", "plan"] and "code" in kinds and "verdict" in kinds and kinds[-1] == "run_end"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    code = next(e.code for e in events if e.WhichOneof("payload") == "code")
    assert code.success_rate > 0 and code.skill == "get_wood" and code.frames > 0
    end = events[-1].run_end
    assert end.success_rate > 0  # the chain of coded skills solves the whole task
    # A client learns the run's frames and controller from the events alone (the skill tests are the frames here).
    assert end.frames_used == sum(e.code.frames for e in events if e.WhichOneof("payload") == "code")
    assert end.controller == "chain of coded skills"
    status = stub.GetRun(planner_pb2.GetRunRequest(run_id=run.run_id))
    assert status.state == planner_pb2.RUN_STATE_DONE and status.tokens > 0
    run_dir = tmp_path / "runs" / run.run_id
    assert (run_dir / "events.jsonl").read_text().count("\n") == len(events)
    state = json.loads((run_dir / "state.json").read_text())
    assert state["subtasks"]["get_wood"]["status"] == "done" and state["final"]["controller"].startswith("chain")
    assert list((run_dir / "attempts").glob("iter0_get_wood_code*.json"))
    later = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id, after_seq=len(events) - 1)))
    assert len(later) == 1


def test_a_plan_that_misses_the_goal_gets_the_task_as_its_last_subtask(planner) -> None:
    wood_only = {"rationale": "the wood a table uses", "subtasks": [
        {"name": "wood", "description": "collect wood", "success": [{"item": "wood", "count": 2}],
         "decision": "code", "skills": []}]}  # within the rules, but it stops short of the table

    def reply(body: dict) -> Reply:
        name = body["response_format"]["json_schema"]["name"]
        return Reply.json({"Plan": wood_only, "SkillAnswer": SKILL}[name])

    stub = planner([reply])
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="place_table")))
    plan = next(e.plan for e in stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=120)
                if e.WhichOneof("payload") == "plan")
    _stop(stub, run.run_id)
    assert [st.name for st in plan.subtasks] == ["wood", "place_table"]
    assert [c.achievement for c in plan.subtasks[-1].success] == ["place_table"]
    assert plan.subtasks[-1].decision == planner_pb2.DECISION_CODE  # no learner here: the goal is coded
    assert "appended" in plan.rationale


def _until_plan(stub: planner_pb2_grpc.PlannerServiceStub, task: str) -> tuple[planner_pb2.StartRunResponse, list]:
    """Starts a run, watches it up to its first plan, stops it (and waits for it to end)."""
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name=task)))
    events = []
    for event in stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=120):
        events.append(event)
        if event.WhichOneof("payload") == "plan":
            break
    _stop(stub, run.run_id)
    return run, events


def test_a_rule_breaking_plan_is_sent_back_once_then_repaired_from_the_rules(planner, tmp_path) -> None:
    table_first = {"rationale": "table, wood, pickaxe", "subtasks": [
        {"name": "table", "description": "place a table", "success": [{"achievement": "place_table"}],
         "decision": "code", "skills": []},
        {"name": "wood", "description": "collect wood", "success": [{"item": "wood", "count": 3}],
         "decision": "code", "skills": []},
        {"name": "cow", "description": "eat a cow", "success": [{"achievement": "eat_cow"}], "decision": "rl",
         "skills": []},
        {"name": "pickaxe", "description": "make a pickaxe", "success": [{"achievement": "make_wood_pickaxe"}],
         "decision": "code", "skills": []}]}
    prompts: list[str] = []

    def reply(body: dict) -> Reply:
        name = body["response_format"]["json_schema"]["name"]
        if name == "Plan":
            prompts.append(body["messages"][-1]["content"])
        return Reply.json({"Plan": table_first, "SkillAnswer": SKILL}[name])  # the same mistakes twice

    stub = planner([reply], plan_check="on")
    run, events = _until_plan(stub, "make_wood_pickaxe")
    assert [e.WhichOneof("payload") for e in events] == ["llm", "llm", "plan"]  # asked once more, both recorded
    assert len(prompts) == 2 and "Your plan breaks the game's rules:" not in prompts[0]
    assert ("Your plan breaks the game's rules: sub-task 1 (table) needs 2 wood, which is got by sub-task 2 (wood), "
            "which comes after it: move it before sub-task 1; sub-task 3 (cow) does not help reach the task's goal "
            "(achievement make_wood_pickaxe) by the game's rules: remove it") in prompts[1]
    assert '"name": "cow"' in prompts[1]  # the plan it broke the rules with came back as the previous plan
    plan = events[-1].plan  # the second answer broke them again: repaired, the model's sub-tasks kept
    assert [st.name for st in plan.subtasks] == ["wood", "table", "pickaxe"]
    assert plan.subtasks[0].description == "collect wood" and "repaired from the rules: removed cow" in plan.rationale
    assert len(list((tmp_path / "runs" / run.run_id / "llm").glob("*-plan-slow.json"))) == 2

    # No usable answer at all: the rules' chain up to the task (the task's own step last, RL with a learner).
    def unusable(body: dict) -> Reply:
        name = body["response_format"]["json_schema"]["name"]
        return Reply.json({"rationale": "r", "subtasks": []} if name == "Plan" else SKILL)

    _, events = _until_plan(planner([unusable], plan_check="on"), "make_wood_pickaxe")
    plan = events[-1].plan
    assert [st.name for st in plan.subtasks] == ["get_3_wood", "place_table", "make_wood_pickaxe"]
    assert "the slow agent's answer was unusable" in plan.rationale and "repaired from the rules" in plan.rationale

    # auto: a model that writes Python (a capable one) keeps its own plan; the critic judges it.
    _, events = _until_plan(planner([reply]), "make_wood_pickaxe")
    assert [e.WhichOneof("payload") for e in events] == ["llm", "plan"]
    assert [st.name for st in events[-1].plan.subtasks] == ["table", "wood", "cow", "pickaxe"]

def test_llm_failing_mid_run_pauses_and_resume_continues(planner, tmp_path) -> None:
    calls = {"n": 0, "healthy": False}

    def plan_then_fail(body: dict) -> Reply:
        calls["n"] += 1
        return code_only(body) if calls["n"] == 1 or calls["healthy"] else Reply(status=500)

    stub = planner([plan_then_fail])
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood")))
    events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=120))
    assert events[-1].WhichOneof("payload") == "error" and events[-1].error.resumable
    assert "failed 2 times" in events[-1].error.message
    assert stub.GetRun(planner_pb2.GetRunRequest(run_id=run.run_id)).state == planner_pb2.RUN_STATE_FAILED
    assert "- outcome: failed: " in _report(stub, run.run_id)["report.md"].decode()  # a partial report
    calls["healthy"] = True  # the LLM is back
    again = stub.StartRun(planner_pb2.StartRunRequest(resume_run_id=run.run_id))  # the planner finds the directory
    assert again.run_id == run.run_id and again.run_dir == run.run_dir
    resumed = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id, after_seq=len(events)),
                                 timeout=300))
    kinds = [e.WhichOneof("payload") for e in resumed]
    assert "plan" not in kinds and kinds[-1] == "run_end"  # the plan from before the failure was kept
    assert "- outcome: finished" in _report(stub, run.run_id)["report.md"].decode()
    # The iteration's cost counts its part before the pause too: the plan's call is among its tokens.
    [end] = [e.iteration_end for e in resumed if e.WhichOneof("payload") == "iteration_end"]
    calls = [e.llm for e in (*events, *resumed) if e.WhichOneof("payload") == "llm" and e.iteration == 0]
    assert end.tokens == sum(c.prompt_tokens + c.completion_tokens for c in calls) > sum(
        e.llm.prompt_tokens + e.llm.completion_tokens for e in resumed if e.WhichOneof("payload") == "llm")


def test_corrupt_run_directory_is_named(planner, tmp_path) -> None:
    stub = planner([code_only])
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood")))
    list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=300))
    state = tmp_path / "runs" / run.run_id / "state.json"
    state.write_text("{not json")
    with pytest.raises(grpc.RpcError) as info:
        stub.StartRun(planner_pb2.StartRunRequest(resume_run_dir=run.run_dir))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and str(state) in info.value.details()
    with pytest.raises(grpc.RpcError) as info:  # not a run of this planner: not found, and nothing said of the disk
        stub.StartRun(planner_pb2.StartRunRequest(resume_run_dir=str(tmp_path / "nowhere")))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND and "request.json" not in info.value.details()


def test_llm_failing_forever_ends_in_an_error_event(planner) -> None:
    stub = planner([Reply(status=500)])
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood")))
    events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=60))
    assert events[-1].WhichOneof("payload") == "error" and "failed 2 times" in events[-1].error.message
    assert stub.GetRun(planner_pb2.GetRunRequest(run_id=run.run_id)).state == planner_pb2.RUN_STATE_FAILED
    text = _report(stub, run.run_id)["report.md"].decode()  # written although no plan was ever made
    assert "- outcome: failed: " in text and "failed 2 times" in text


def test_bad_requests(planner) -> None:
    stub = planner([by_schema])
    for request, code, needle in [
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="build_rocket")), "NOT_FOUND",
         "no task 'build_rocket' on crafter: crafter offers crafter"),  # the env server's words
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="x", success=[common_pb2.Condition(
            inventory=common_pb2.ItemCount(item="gold", count=1))])), "INVALID_ARGUMENT", "unknown item 'gold'"),
        (planner_pb2.StartRunRequest(), "INVALID_ARGUMENT", "task"),
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"), mode="vibes"),
         "INVALID_ARGUMENT", "mode"),
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"),
                                     budgets=planner_pb2.Budgets(candidates=1000)), "INVALID_ARGUMENT", "candidates"),
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"),
                                     budgets=planner_pb2.Budgets(total_env_frames=-1)), "INVALID_ARGUMENT",
         "total_env_frames"),
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"),
                                     budgets=planner_pb2.Budgets(target_success=1.5)), "INVALID_ARGUMENT",
         "budgets.target_success=1.5 must be in 0.0..1.0"),
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"),
                                     budgets=planner_pb2.Budgets(eval_episodes=200)), "INVALID_ARGUMENT",
         "budgets.eval_episodes=200 is more than the env server evaluates in one call (8"),  # Describe's limit
        (planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"),
                                     budgets=planner_pb2.Budgets(total_env_frames=100)), "INVALID_ARGUMENT",
         "budgets.total_env_frames=100 is less than one skill test (2 episodes x 150 frames = 300)"),
    ]:
        with pytest.raises(grpc.RpcError) as info:
            stub.StartRun(request)
        assert info.value.code().name == code and needle in info.value.details()
    for call in (lambda: list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id="nope"))),
                 lambda: stub.GetRun(planner_pb2.GetRunRequest(run_id="nope")),
                 lambda: stub.GetRun(planner_pb2.GetRunRequest(run_id="r" * 200))):
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code() == grpc.StatusCode.NOT_FOUND and len(info.value.details()) < 300
    with pytest.raises(grpc.RpcError) as info:  # a bad value is named by its size, never copied into the status
        stub.GetRun(planner_pb2.GetRunRequest(run_id="r" * 5_000_000))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "run_id is 5000000 chars; the limit is 200"


def test_the_critic_gets_the_rules_the_test_protocol_and_frames_and_keeps_a_passed_subtask(planner, env_server,
                                                                                           tmp_path) -> None:
    keep = {"success": True, "diagnosis": "Every episode chopped a tree.", "suggestion": "No change needed.",
            "target": "keep"}

    def reply(body: dict) -> Reply:
        name = body["response_format"]["json_schema"]["name"]
        return Reply.json({"Plan": CODE_PLAN, "SkillAnswer": SKILL, "CriticAnswer": keep}[name])

    fake_critic_llm = FakeOpenAIServer([reply]).__enter__()
    critic_llm = LLMClient(LLMSettings(max_retries=0, timeout_seconds=5, model="scripted"),
                           base_url=fake_critic_llm.base_url, record_dir=tmp_path / "critic-llm")
    server, port = create_server("127.0.0.1:0", [ServiceBinding(
        CRITIC_SERVICE, critic_pb2_grpc.add_CriticServiceServicer_to_server,
        CriticServicer(CriticSettings(success_threshold=0.5, attach_frames=True, llm_on_pass=True), critic_llm))])
    try:
        stub = planner([reply], critic=f"127.0.0.1:{port}")
        run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"), seed=2))
        events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=300))
    finally:
        stop_server(server, 1)
        fake_critic_llm.__exit__(None)
    verdict = next(e.verdict for e in events if e.WhichOneof("payload") == "verdict")
    assert verdict.success and verdict.target == critic_pb2.TARGET_KEEP
    text, *images = next(r["messages"][0]["content"] for r in fake_critic_llm.requests
                         if r["response_format"]["json_schema"]["name"] == "CriticAnswer")
    prompt = text["text"]
    # RunSkill's frames went through the planner to the critic's LLM: 2 test episodes, 4 frames each.
    assert "8 frames of the episodes follow" in prompt and len(images) == 8
    for part in images:
        assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/png;base64,")
        png = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
        assert PIL.Image.open(io.BytesIO(png)).size == (64, 64)
    [record] = (tmp_path / "runs" / run.run_id / "llm").glob("*critic*.json")
    assert "(image left out of the record)" in record.read_text() and "base64" not in record.read_text()
    rules = env_server.stub.Describe(env_pb2.DescribeRequest()).rules
    assert rules.text.strip() in prompt  # the planner passed the served rules on
    assert "How the attempt was tested:\nThe skill is tested on 2 episodes" in prompt
    assert "at most 150 frames" in prompt and "Items every test episode started with: nothing" in prompt


def test_the_report_is_served_once_the_run_ended(planner, tmp_path) -> None:
    gate = threading.Event()

    def held(body: dict) -> Reply:
        gate.wait(4)  # the run stays in its first LLM call until the test looked at it
        return code_only(body)

    stub = planner([held])
    run = stub.StartRun(planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"), seed=2))
    with pytest.raises(grpc.RpcError) as info:
        _report(stub, run.run_id)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "still running" in info.value.details()
    gate.set()
    events = list(stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run.run_id), timeout=300))
    assert events[-1].run_end.report == run.run_dir + "/report.md"
    files = _report(stub, run.run_id)  # as soon as the stream ended
    # The report first, then its plots, then the final controller's animation (this chain succeeds: no failure).
    assert list(files) == ["report.md", "curves.png", "iterations.png", "animations/final_success.gif"]
    run_dir = tmp_path / "runs" / run.run_id
    assert all(files[name] == (run_dir / name).read_bytes() for name in files)
    text = files["report.md"].decode()
    assert "- outcome: finished" in text and "| get_wood | code | done |" in text
    (run_dir / "report.md").unlink()
    with pytest.raises(grpc.RpcError) as info:
        _report(stub, run.run_id)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "has no report" in info.value.details()


def test_bad_report_and_resume_requests(planner) -> None:
    stub = planner([by_schema])
    huge = "r/" * 2_500_000
    for run_id, code, needle in [
        ("", grpc.StatusCode.INVALID_ARGUMENT, "run_id is empty"),
        ("../../etc", grpc.StatusCode.INVALID_ARGUMENT, "'../../etc' is not a run id"),
        ("r/" * 100, grpc.StatusCode.INVALID_ARGUMENT, "(200 chars) is not a run id"),
        (huge, grpc.StatusCode.INVALID_ARGUMENT, "run_id is 5000000 chars; the limit is 200"),
        ("nope", grpc.StatusCode.NOT_FOUND, "no run 'nope' on this planner"),
    ]:
        with pytest.raises(grpc.RpcError) as info:
            list(stub.GetRunReport(planner_pb2.GetRunReportRequest(run_id=run_id)))
        assert info.value.code() == code and needle in info.value.details() and len(info.value.details()) < 400
    for request, code, needle in [
        (planner_pb2.StartRunRequest(resume_run_id="nope"), grpc.StatusCode.NOT_FOUND, "no run 'nope'"),
        (planner_pb2.StartRunRequest(resume_run_id="r/" * 100), grpc.StatusCode.INVALID_ARGUMENT,
         "resume_run_id='r/r/"),
        (planner_pb2.StartRunRequest(resume_run_id=huge), grpc.StatusCode.INVALID_ARGUMENT,
         "resume_run_id is 5000000 chars; the limit is 200"),
        (planner_pb2.StartRunRequest(resume_run_id="a", resume_run_dir="/tmp"), grpc.StatusCode.INVALID_ARGUMENT,
         "not both"),
    ]:
        with pytest.raises(grpc.RpcError) as info:
            stub.StartRun(request)
        assert info.value.code() == code and needle in info.value.details() and len(info.value.details()) < 400
