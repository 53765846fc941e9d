"""The env server's gRPC edge under hostile input, over a real channel (issue 10).

Every bad request gets a precise status with a short, actionable message (never INTERNAL, never a
RESOURCE_EXHAUSTED caused by echoing megabytes into the status), and the server keeps serving.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from env_server_support import assert_healthy

from rlgpt.env_client import list_all_skills
from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.servicer import LIST_PAGE_DEFAULT, LIST_PAGE_MAX

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
OK = grpc.StatusCode.OK
HUGE = 5 * 1024 * 1024
SKILL = "def skill(agent):\n    yield 'noop'\n"
MAX_I32, MIN_I32 = 2**31 - 1, -(2**31)
MAX_I64, MIN_I64 = 2**63 - 1, -(2**63)


pytestmark = pytest.mark.usefixtures("no_leftover_sessions")


def call(stub: Any, rpc: str, request: Any) -> tuple[grpc.StatusCode, str, Any]:
    """(code, details, reply) of one call; streams get one request and are drained."""
    try:
        if rpc == "StreamSteps":
            reply = list(stub.StreamSteps(iter([request]), timeout=60))
        else:
            reply = getattr(stub, rpc)(request, timeout=60)
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or "", None
    return OK, "", reply


def session_id(env_server, **fields: Any) -> str:
    return env_server.stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=fields.pop("num_envs", 1),
                                                                      **fields)).session_id


# --- 1. huge values are never echoed ------------------------------------------------------------------
X = "x" * HUGE
HUGE_VALUES: dict[str, tuple[str, Callable[[Any], Any], str]] = {
    "register_name": ("RegisterSkill", lambda e: env_pb2.RegisterSkillRequest(name=X, code=SKILL), "name is"),
    "register_backend": ("RegisterSkill", lambda e: env_pb2.RegisterSkillRequest(name="ok", code=SKILL, backend=X),
                         "backend is"),
    "register_description": ("RegisterSkill", lambda e: env_pb2.RegisterSkillRequest(
        name="ok", code=SKILL, description=X), "description is"),
    "step_session": ("Step", lambda e: env_pb2.StepRequest(session_id=X, actions=[0]), "session_id is"),
    "stream_session": ("StreamSteps", lambda e: env_pb2.StepRequest(session_id=X, actions=[0]), "session_id is"),
    "reset_session": ("Reset", lambda e: env_pb2.ResetRequest(session_id=X), "session_id is"),
    "close_session": ("CloseSession", lambda e: env_pb2.CloseSessionRequest(session_id=X), "session_id is"),
    "describe_backend": ("Describe", lambda e: env_pb2.DescribeRequest(backend=X), "backend is"),
    "create_backend": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(num_envs=1, backend=X), "backend is"),
    "create_task_name": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(
        num_envs=1, task=common_pb2.TaskSpec(name=X)), "task.name is"),
    "create_task_description": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(
        num_envs=1, task=common_pb2.TaskSpec(description=X)), "task.description is"),
    "create_client": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(num_envs=1, client=X), "client is"),
    "create_reward_target": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(
        num_envs=1, reward_terms=[common_pb2.RewardTerm(kind="achievement", target=X, weight=1)]),
        "reward_terms[0].target is"),
    "create_reward_kind": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(
        num_envs=1, reward_terms=[common_pb2.RewardTerm(kind=X, weight=1)]), "reward_terms[0].kind is"),
    "create_primitive": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(
        num_envs=1, primitive_actions=["noop", X]), "primitive_actions[1] is"),
    "create_skill": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(num_envs=1, skills=[X]), "skills[0] is"),
    "create_achievement": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(
        num_envs=1, task=common_pb2.TaskSpec(success=[common_pb2.Condition(achievement=X)])),
        "task.success[0].achievement is"),
    "create_start_item": ("CreateSession", lambda e: env_pb2.CreateSessionRequest(
        num_envs=1, task=common_pb2.TaskSpec(start_inventory=[common_pb2.ItemCount(item=X, count=1)])),
        "task.start_inventory[0].item is"),
    "run_skill_name": ("RunSkill", lambda e: env_pb2.RunSkillRequest(skill=X, episodes=1), "skill is"),
    "run_skill_task": ("RunSkill", lambda e: env_pb2.RunSkillRequest(
        skill="any", episodes=1, task=common_pb2.TaskSpec(name=X)), "task.name is"),
    "list_backend": ("ListSkills", lambda e: env_pb2.ListSkillsRequest(backend=X), "backend is"),
    "list_token": ("ListSkills", lambda e: env_pb2.ListSkillsRequest(page_token=X), "page_token is"),
    "delete_name": ("DeleteSkill", lambda e: env_pb2.DeleteSkillRequest(name=X), "name is"),
}


@pytest.mark.parametrize("case", sorted(HUGE_VALUES))
def test_huge_value_is_refused_with_a_short_message(env_server, case: str) -> None:
    rpc, build, expected = HUGE_VALUES[case]
    code, details, _ = call(env_server.stub, rpc, build(env_server))
    assert code == INVALID, (code, details[:300])
    assert f"{expected} {HUGE} chars" in details
    assert len(details) < 300  # the value is named by its size, never copied
    assert_healthy(env_server)


def test_session_ids_too_long_empty_or_unknown(env_server) -> None:
    code, details, _ = call(env_server.stub, "Step", env_pb2.StepRequest(session_id="a" * 17, actions=[0]))
    assert code == INVALID and "session_id is 17 chars; ids are 16" in details
    code, details, _ = call(env_server.stub, "Step", env_pb2.StepRequest(session_id="", actions=[0]))
    assert code == INVALID and "session_id is empty" in details
    code, details, _ = call(env_server.stub, "Reset", env_pb2.ResetRequest(session_id="0123456789abcdef"))
    assert code == NOT_FOUND and "'0123456789abcdef'" in details and "create one" in details
    assert_healthy(env_server)


def test_values_under_the_limit_are_quoted_as_a_prefix(env_server) -> None:
    name_limit = env_server.servicer.settings.max_name_chars
    name = "z" * name_limit  # within the size limit, but unknown: the message quotes a prefix and the size
    code, details, _ = call(env_server.stub, "CreateSession", env_pb2.CreateSessionRequest(
        num_envs=1, task=common_pb2.TaskSpec(name=name)))
    assert code == NOT_FOUND and f"... ({name_limit} chars)" in details and name not in details
    code, details, _ = call(env_server.stub, "Describe", env_pb2.DescribeRequest(backend=name))
    assert code == INVALID and "unknown backend" in details and f"({name_limit} chars)" in details
    assert_healthy(env_server)


# --- 2. repeated fields have limits ---------------------------------------------------------------------
def _many(n: int) -> dict[str, Any]:
    return {
        "primitive_actions": ("CreateSession", env_pb2.CreateSessionRequest(num_envs=1,
                                                                            primitive_actions=["noop"] * n)),
        "skills": ("CreateSession", env_pb2.CreateSessionRequest(num_envs=1, skills=["s"] * n)),
        "reward_terms": ("CreateSession", env_pb2.CreateSessionRequest(
            num_envs=1, reward_terms=[common_pb2.RewardTerm(kind="step", weight=1)] * n)),
        "task.success": ("CreateSession", env_pb2.CreateSessionRequest(num_envs=1, task=common_pb2.TaskSpec(
            success=[common_pb2.Condition(achievement="collect_wood")] * n))),
        "task.start_inventory": ("CreateSession", env_pb2.CreateSessionRequest(num_envs=1, task=common_pb2.TaskSpec(
            start_inventory=[common_pb2.ItemCount(item="wood", count=1)] * n))),
        "reward_terms ": ("RunSkill", env_pb2.RunSkillRequest(
            skill="any", episodes=1, reward_terms=[common_pb2.RewardTerm(kind="step", weight=1)] * n)),
    }


@pytest.mark.parametrize("field", sorted(_many(1)))
def test_repeated_field_over_its_limit(env_server, field: str) -> None:
    list_limit = env_server.servicer.settings.max_list_entries
    rpc, request = _many(list_limit + 1)[field]
    code, details, _ = call(env_server.stub, rpc, request)
    assert code == INVALID and f"{field.strip()} has {list_limit + 1} entries; the limit is {list_limit}" in details
    assert_healthy(env_server)


def test_env_indices_over_the_limit(env_server) -> None:
    sid = session_id(env_server, num_envs=2)
    limit = env_server.servicer.settings.max_envs_per_session
    code, details, _ = call(env_server.stub, "Reset", env_pb2.ResetRequest(session_id=sid,
                                                                         env_indices=[0] * 1_000_000))
    assert code == INVALID and f"env_indices has 1000000 entries; the limit is {limit}" in details
    code, details, _ = call(env_server.stub, "Reset", env_pb2.ResetRequest(session_id=sid, env_indices=[0, 1, 0]))
    assert code == INVALID and details == "env_indices repeats [0]: each env is reset at most once per call"
    code, details, _ = call(env_server.stub, "Reset", env_pb2.ResetRequest(session_id=sid,
                                                                         env_indices=[-1, MIN_I32]))
    assert code == INVALID and "out of range 0..1" in details
    env_server.stub.Reset(env_pb2.ResetRequest(session_id=sid, env_indices=[1]))
    assert_healthy(env_server)


# --- 3. ListSkills pages ---------------------------------------------------------------------------------
@pytest.fixture
def many_skills(env_server):
    """70 skills put straight into the registry (registering each would smoke-test each), removed after."""
    names = [f"page_{i:03d}" for i in range(70)]
    for name in names:
        env_server.servicer.skills.put(name, f"does {name}", SKILL, "crafter", True)
    yield names
    for name in names:
        call(env_server.stub, "DeleteSkill", env_pb2.DeleteSkillRequest(name=name))


def test_list_skills_pages_through_every_skill(env_server, many_skills) -> None:
    stub = env_server.stub
    first = stub.ListSkills(env_pb2.ListSkillsRequest())
    assert len(first.skills) == LIST_PAGE_DEFAULT and first.next_page_token
    assert all(s.code == "" for s in first.skills) and any(s.description for s in first.skills)  # cheap by default
    seen, token = [], ""
    while True:
        page = stub.ListSkills(env_pb2.ListSkillsRequest(page_size=7, page_token=token, include_code=True))
        assert len(page.skills) <= 7 and all(s.code == SKILL for s in page.skills if s.name.startswith("page_"))
        seen += [s.name for s in page.skills]
        token = page.next_page_token
        if not token:
            break
    assert seen == sorted(seen) and len(seen) == len(set(seen)) and set(many_skills) <= set(seen)
    big = stub.ListSkills(env_pb2.ListSkillsRequest(page_size=MAX_I32))
    assert len(big.skills) == min(len(seen), LIST_PAGE_MAX)
    assert [s.name for s in list_all_skills(stub, "crafter").skills] == seen
    # A skill deleted between pages does not shift the next page.
    page = stub.ListSkills(env_pb2.ListSkillsRequest(page_size=3))
    stub.DeleteSkill(env_pb2.DeleteSkillRequest(name=page.skills[-1].name))
    following = stub.ListSkills(env_pb2.ListSkillsRequest(page_size=3, page_token=page.next_page_token))
    assert following.skills[0].name == seen[3]
    assert_healthy(env_server)


def _token(payload: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


BAD_LIST = {
    "negative_page_size": (env_pb2.ListSkillsRequest(page_size=-1), "page_size=-1"),
    "min_page_size": (env_pb2.ListSkillsRequest(page_size=MIN_I32), "page_size="),
    "garbage_token": (env_pb2.ListSkillsRequest(page_token="not a token!"), "page_token"),
    "non_ascii_token": (env_pb2.ListSkillsRequest(page_token="ü" * 10), "page_token"),
    "base64_not_json": (env_pb2.ListSkillsRequest(page_token=base64.urlsafe_b64encode(b"\xff\x00").decode()),
                        "page_token"),
    "json_wrong_shape": (env_pb2.ListSkillsRequest(page_token=_token({"after": "x"})), "page_token"),
    "json_empty_name": (env_pb2.ListSkillsRequest(page_token=_token(["", ""])), "page_token"),
    "other_backend": (env_pb2.ListSkillsRequest(backend="crafter", page_token=_token(["", "a"])),
                      "keep the backend filter"),
}


@pytest.mark.parametrize("case", sorted(BAD_LIST))
def test_list_skills_bad_paging(env_server, case: str) -> None:
    request, expected = BAD_LIST[case]
    code, details, _ = call(env_server.stub, "ListSkills", request)
    assert code == INVALID and expected in details, details
    assert_healthy(env_server)


# --- 4. DeleteSkill ---------------------------------------------------------------------------------------
def test_delete_skill_keeps_open_sessions_working(env_server) -> None:
    stub = env_server.stub
    first = stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="edge_doomed", code=SKILL, replace=True)).skill
    sid = session_id(env_server, skills=["edge_doomed"], skill_max_steps=3)
    deleted = stub.DeleteSkill(env_pb2.DeleteSkillRequest(name="edge_doomed")).skill
    assert deleted.name == "edge_doomed" and deleted.code == SKILL and deleted.version == first.version
    # the open session keeps its copy of the skill
    step = stub.Step(env_pb2.StepRequest(session_id=sid, actions=[17]))
    assert step.infos[0].skill == "edge_doomed" and not step.infos[0].HasField("skill_error")
    code, details, _ = call(stub, "DeleteSkill", env_pb2.DeleteSkillRequest(name="edge_doomed"))
    assert code == NOT_FOUND and "edge_doomed" in details
    code, details, _ = call(stub, "CreateSession", env_pb2.CreateSessionRequest(num_envs=1, skills=["edge_doomed"]))
    assert code == NOT_FOUND and "RegisterSkill" in details
    code, _, _ = call(stub, "RunSkill", env_pb2.RunSkillRequest(skill="edge_doomed", episodes=1))
    assert code == NOT_FOUND
    assert "edge_doomed" not in [s.name for s in list_all_skills(stub).skills]
    # registered again, it gets a new version: it never reuses the deleted one's
    again = stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="edge_doomed", code=SKILL)).skill
    assert again.version > first.version
    stub.DeleteSkill(env_pb2.DeleteSkillRequest(name="edge_doomed"))
    assert_healthy(env_server)


def test_skill_limit_message_names_delete_skill(env_server) -> None:
    registry = env_server.servicer.skills
    already = len(registry.all())
    fillers = [f"fill_{i:04d}" for i in range(env_server.servicer.settings.max_skills - already)]
    try:
        for name in fillers:
            registry.put(name, "", SKILL, "crafter", False)
        code, details, _ = call(env_server.stub, "RegisterSkill",
                                env_pb2.RegisterSkillRequest(name="one_too_many", code=SKILL))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "DeleteSkill" in details
        env_server.stub.DeleteSkill(env_pb2.DeleteSkillRequest(name=fillers[0]))
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="one_too_many", code=SKILL))
    finally:
        for name in [*fillers[1:], "one_too_many"]:
            call(env_server.stub, "DeleteSkill", env_pb2.DeleteSkillRequest(name=name))
    assert_healthy(env_server)


# --- 5. calls racing a CloseSession -----------------------------------------------------------------------
def test_step_waiting_for_the_lock_while_the_session_closes_is_not_found(env_server) -> None:
    """Deterministic: the Step has found the session and waits for its lock while a close runs."""
    sid = session_id(env_server)
    manager = env_server.servicer.sessions
    session = manager.get(sid)
    results: list[tuple[grpc.StatusCode, str]] = []
    with session.lock:  # what CloseSession holds while it closes
        threads = [threading.Thread(target=lambda rpc=rpc, request=request: results.append(
            call(env_server.stub, rpc, request)[:2])) for rpc, request in [
            ("Step", env_pb2.StepRequest(session_id=sid, actions=[0])),
            ("StreamSteps", env_pb2.StepRequest(session_id=sid, actions=[0])),
            ("Reset", env_pb2.ResetRequest(session_id=sid))]]
        for t in threads:
            t.start()
        time.sleep(1.0)  # they reach the lock
        manager.release(sid)
        session.close()
    for t in threads:
        t.join(30)
    assert [code for code, _ in results] == [NOT_FOUND] * 3, results
    assert all(sid in details for _, details in results)
    assert_healthy(env_server)


def test_close_session_racing_steps_never_answers_internal(env_server) -> None:
    codes: list[grpc.StatusCode] = []
    for _ in range(6):
        sid = session_id(env_server, num_envs=2)
        stop = threading.Event()

        def hammer(rpc: str, sid: str = sid, stop: threading.Event = stop) -> None:
            request: Any = (env_pb2.ResetRequest(session_id=sid) if rpc == "Reset"
                            else env_pb2.StepRequest(session_id=sid, actions=[0, 1]))
            while not stop.is_set():
                code, details, _ = call(env_server.stub, rpc, request)
                if code != OK:
                    codes.append(code)
                    assert code == NOT_FOUND, (code, details)
                    return

        threads = [threading.Thread(target=hammer, args=(rpc,)) for rpc in ("Step", "Step", "StreamSteps", "Reset")]
        for t in threads:
            t.start()
        time.sleep(0.2)
        env_server.stub.CloseSession(env_pb2.CloseSessionRequest(session_id=sid))
        for t in threads:
            t.join(30)
        stop.set()
    assert codes and set(codes) == {NOT_FOUND}
    assert_healthy(env_server)


def test_session_closed_behind_the_managers_back_is_not_found(env_server) -> None:
    sid = session_id(env_server)
    session = env_server.servicer.sessions.get(sid)
    session.close()  # closed without the manager: a caller still holding it gets NOT_FOUND, not INTERNAL
    code, details, _ = call(env_server.stub, "Step", env_pb2.StepRequest(session_id=sid, actions=[0]))
    assert code == NOT_FOUND and sid in details
    env_server.servicer.sessions.close_all()
    assert_healthy(env_server)


# --- 6. fuzzing: every bad value gets its proper code, never INTERNAL -------------------------------------
def _create(**fields: Any) -> tuple[str, Callable[[Any], Any]]:
    fields.setdefault("num_envs", 1)
    return "CreateSession", lambda e: env_pb2.CreateSessionRequest(**fields)


def _task(**fields: Any) -> tuple[str, Callable[[Any], Any]]:
    return _create(task=common_pb2.TaskSpec(**fields))


def _inventory(item: str, count: int) -> common_pb2.Condition:
    return common_pb2.Condition(inventory=common_pb2.ItemCount(item=item, count=count))


def _term(kind: str, target: str = "", weight: float = 1.0) -> common_pb2.RewardTerm:
    return common_pb2.RewardTerm(kind=kind, target=target, weight=weight)


def _on_session(rpc: str, num_envs: int = 1, **fields: Any) -> tuple[str, Callable[[Any], Any]]:
    kind = {"Reset": env_pb2.ResetRequest, "Step": env_pb2.StepRequest, "StreamSteps": env_pb2.StepRequest,
            "CloseSession": env_pb2.CloseSessionRequest}[rpc]
    return rpc, lambda e: kind(session_id=session_id(e, num_envs=num_envs), **fields)


def _run(**fields: Any) -> tuple[str, Callable[[Any], Any]]:
    fields.setdefault("skill", "edge_noop")
    fields.setdefault("episodes", 1)
    return "RunSkill", lambda e: env_pb2.RunSkillRequest(**fields)


def _register(**fields: Any) -> tuple[str, Callable[[Any], Any]]:
    fields.setdefault("code", SKILL)
    return "RegisterSkill", lambda e: env_pb2.RegisterSkillRequest(**fields)


FUZZ: dict[str, tuple[tuple[str, Callable[[Any], Any]], grpc.StatusCode, str]] = {
    # CreateSession ints
    "num_envs_0": (_create(num_envs=0), INVALID, "num_envs=0 must be in 1..8"),
    "num_envs_negative": (_create(num_envs=-1), INVALID, "num_envs=-1"),
    "num_envs_max": (_create(num_envs=MAX_I32), INVALID, f"num_envs={MAX_I32}"),
    "num_envs_min": (_create(num_envs=MIN_I32), INVALID, "num_envs="),
    "episode_length_negative": (_create(episode_length=-1), INVALID, "episode_length=-1"),
    "episode_length_huge": (_create(episode_length=MAX_I32), INVALID, "episode_length="),
    "skill_max_steps_negative": (_create(skill_max_steps=MIN_I32), INVALID, "skill_max_steps="),
    "skill_max_steps_huge": (_create(skill_max_steps=MAX_I32), INVALID, "skill_max_steps="),
    "seed_max": (_create(seed=MAX_I64), OK, ""),
    "seed_min": (_create(seed=MIN_I64), OK, ""),
    "seed_max_many_envs": (_create(seed=MAX_I64, num_envs=8), OK, ""),
    # CreateSession strings
    "backend_empty": (_create(backend=""), OK, ""),
    "backend_unknown": (_create(backend="bogus"), INVALID, "unknown backend 'bogus'; known: crafter, minedojo"),
    "backend_case": (_create(backend="Crafter"), INVALID, "unknown backend 'Crafter'"),
    "backend_nul": (_create(backend="crafter\x00"), INVALID, "backend holds a control character ('\\x00' at 7)"),
    "task_unknown": (_task(name="fly"), NOT_FOUND, "no task 'fly' on crafter: crafter offers"),
    "task_empty_condition": (_task(success=[common_pb2.Condition()]), INVALID, "empty condition"),
    "task_achievement_empty": (_task(success=[common_pb2.Condition(achievement="")]), INVALID, "unknown achievement"),
    "task_item_unknown": (_task(success=[_inventory("gold", 1)]), INVALID, "unknown item 'gold'"),
    "task_count_zero": (_task(success=[_inventory("wood", 0)]), INVALID, "count 0 must be in 1..1000"),
    "task_count_max": (_task(success=[_inventory("wood", MAX_I32)]), INVALID, "must be in 1..1000"),
    "task_count_negative": (_task(success=[_inventory("wood", MIN_I32)]), INVALID, "must be in 1..1000"),
    "start_count_negative": (_task(start_inventory=[common_pb2.ItemCount(item="wood", count=-1)]), INVALID,
                             "count -1 must be in 0..1000"),
    "start_count_max": (_task(start_inventory=[common_pb2.ItemCount(item="wood", count=MAX_I32)]), INVALID,
                        "must be in 0..1000"),
    "start_item_empty": (_task(start_inventory=[common_pb2.ItemCount(item="", count=1)]), INVALID, "unknown item ''"),
    "start_all_items": (_task(start_inventory=[common_pb2.ItemCount(item="diamond", count=1000)]), OK, ""),
    "reward_kind_empty": (_create(reward_terms=[_term("")]), INVALID, "unknown kind ''"),
    "reward_kind_case": (_create(reward_terms=[_term("Step")]), INVALID, "unknown kind 'Step'"),
    "reward_weight_nan": (_create(reward_terms=[_term("step", weight=float("nan"))]), INVALID, "must be a finite"),
    "reward_weight_inf": (_create(reward_terms=[_term("step", weight=float("inf"))]), INVALID, "must be a finite"),
    "reward_weight_neg_inf": (_create(reward_terms=[_term("death", weight=float("-inf"))]), INVALID, "finite"),
    "reward_weight_huge": (_create(reward_terms=[_term("step", weight=3.0e38)]), OK, ""),
    "reward_target_missing": (_create(reward_terms=[_term("achievement")]), INVALID, "unknown achievement target"),
    "reward_target_extra": (_create(reward_terms=[_term("step", "wood")]), INVALID, "takes no target"),
    "primitive_empty": (_create(primitive_actions=[""]), INVALID, "unknown primitive action ''"),
    "primitive_duplicate": (_create(primitive_actions=["noop", "noop"]), INVALID, "duplicates"),
    "skill_empty": (_create(skills=[""]), NOT_FOUND, "no skill named ''"),
    "skill_duplicate": (_create(skills=["edge_noop", "edge_noop"]), INVALID, "duplicates"),
    "many_problems": (_create(reward_terms=[_term("bogus")] * 40), INVALID, "and 30 more problems"),
    # Reset / Step / StreamSteps / CloseSession
    "reset_index_negative": (_on_session("Reset", env_indices=[-1]), INVALID, "out of range 0..0"),
    "reset_index_max": (_on_session("Reset", env_indices=[MAX_I32]), INVALID, "out of range"),
    "reset_seed_max": (_on_session("Reset", seed=MAX_I64), OK, ""),
    "reset_seed_min": (_on_session("Reset", seed=MIN_I64), OK, ""),
    "reset_session_empty": (("Reset", lambda e: env_pb2.ResetRequest()), INVALID, "session_id is empty"),
    "step_no_actions": (_on_session("Step", actions=[]), INVALID, "actions has 0 entries"),
    "step_action_max": (_on_session("Step", actions=[MAX_I32]), INVALID, "out of range"),
    "step_action_min": (_on_session("Step", actions=[MIN_I32]), INVALID, "out of range"),
    "step_too_many_actions": (_on_session("Step", actions=[0] * 1_000_000), INVALID, "actions has 1000000 entries"),
    "stream_action_bad": (_on_session("StreamSteps", num_envs=2, actions=[0, 99]), INVALID, "out of range"),
    "step_indices_some": (_on_session("Step", num_envs=3, actions=[0, 1], env_indices=[2, 0]), OK, ""),
    "step_indices_repeat": (_on_session("Step", num_envs=2, actions=[0, 0], env_indices=[1, 1]), INVALID,
                            "env_indices repeats [1]: each env is stepped at most once per call"),
    "step_indices_range": (_on_session("Step", num_envs=2, actions=[0], env_indices=[MAX_I32]), INVALID,
                           "env_indices [2147483647] out of range 0..1"),
    "step_indices_negative": (_on_session("Step", num_envs=2, actions=[0], env_indices=[-1]), INVALID,
                              "out of range 0..1"),
    "step_indices_length": (_on_session("Step", num_envs=2, actions=[0, 0], env_indices=[1]), INVALID,
                            "actions has 2 entries and env_indices 1: one action per listed env"),
    "step_indices_too_many": (_on_session("Step", actions=[0], env_indices=[0] * 1_000_000), INVALID,
                              "env_indices has 1000000 entries"),
    "stream_session_unknown": (("StreamSteps", lambda e: env_pb2.StepRequest(session_id="nope", actions=[0])),
                               NOT_FOUND, "no session 'nope'"),
    "close_session_empty": (("CloseSession", lambda e: env_pb2.CloseSessionRequest()), INVALID, "session_id is empty"),
    "close_session_unknown": (("CloseSession", lambda e: env_pb2.CloseSessionRequest(session_id="nope")),
                              NOT_FOUND, "no session 'nope'"),
    # RunSkill
    "run_episodes_0": (_run(episodes=0), INVALID, "episodes=0 must be in 1..8"),
    "run_episodes_negative": (_run(episodes=MIN_I32), INVALID, "episodes="),
    "run_episodes_max": (_run(episodes=MAX_I32), INVALID, "episodes="),
    "run_max_steps_negative": (_run(max_steps=-1), INVALID, "max_steps=-1"),
    "run_max_steps_huge": (_run(max_steps=MAX_I32), INVALID, "max_steps="),
    "run_skill_empty": (_run(skill=""), NOT_FOUND, "no skill named ''"),
    "run_backend_unknown": (_run(backend="bogus"), INVALID, "unknown backend 'bogus'"),
    "run_task_unknown": (_run(task=common_pb2.TaskSpec(name="fly")), NOT_FOUND, "no task 'fly'"),
    "run_weight_nan": (_run(reward_terms=[_term("step", weight=float("nan"))]), INVALID, "finite"),
    "run_seed_max": (_run(seed=MAX_I64, max_steps=3), OK, ""),
    "run_seed_min": (_run(seed=MIN_I64, max_steps=3), OK, ""),
    # RegisterSkill
    "register_name_empty": (_register(name=""), INVALID, "skill name '' must match"),
    "register_name_bad": (_register(name="Bad Name"), INVALID, "must match"),
    "register_name_65": (_register(name="a" * 65), INVALID, "must match"),
    "register_code_empty": (_register(name="edge_empty", code=""), INVALID, "edge_empty"),
    "register_backend_unknown": (_register(name="edge_x", backend="bogus"), INVALID, "unknown backend 'bogus'"),
    # Describe, ListSkills, DeleteSkill
    "describe_unknown": (("Describe", lambda e: env_pb2.DescribeRequest(backend="bogus")), INVALID, "unknown backend"),
    "describe_default": (("Describe", lambda e: env_pb2.DescribeRequest()), OK, ""),
    "list_unknown_backend": (("ListSkills", lambda e: env_pb2.ListSkillsRequest(backend="bogus")), OK, ""),
    "delete_empty": (("DeleteSkill", lambda e: env_pb2.DeleteSkillRequest()), NOT_FOUND, "no skill named ''"),
    "delete_unknown": (("DeleteSkill", lambda e: env_pb2.DeleteSkillRequest(name="nope")), NOT_FOUND, "'nope'"),
}


@pytest.fixture(scope="module")
def noop_skill(env_server) -> str:
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="edge_noop", code=SKILL, replace=True))
    yield "edge_noop"
    call(env_server.stub, "DeleteSkill", env_pb2.DeleteSkillRequest(name="edge_noop"))


@pytest.mark.parametrize("case", sorted(FUZZ))
def test_bad_input_gets_its_proper_code(env_server, request: pytest.FixtureRequest, case: str) -> None:
    (rpc, build), expected_code, expected_text = FUZZ[case]
    if rpc == "RunSkill" or case.startswith("skill_"):
        request.getfixturevalue("noop_skill")  # only these cases need a registered skill
    code, details, reply = call(env_server.stub, rpc, build(env_server))
    assert code != grpc.StatusCode.INTERNAL, details
    assert code == expected_code, (code, details)
    assert expected_text in details, details
    assert len(details.encode()) <= 2000
    if rpc == "CreateSession" and code == OK:  # an accepted extreme value also steps
        env_server.stub.Step(env_pb2.StepRequest(session_id=reply.session_id, actions=[0] * reply.num_envs))
    assert_healthy(env_server)


def test_undecodable_request_is_not_internal(env_server) -> None:
    """Bytes that are no StepRequest (a string field holding invalid UTF-8)."""
    raw = env_server.channel.unary_unary("/rlgpt.v1.EnvService/Step", request_serializer=lambda b: b,
                                         response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as info:
        raw(b"\x0a\x02\xff\xfe", timeout=30)  # field 1 (session_id), 2 bytes, not UTF-8
    assert info.value.code() == INVALID and "does not parse" in info.value.details(), info.value.details()
    stream = env_server.channel.stream_stream("/rlgpt.v1.EnvService/StreamSteps", request_serializer=lambda b: b,
                                              response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as info:
        list(stream(iter([b"\x12\x05\x80"]), timeout=30))  # field 2 (actions), truncated
    assert info.value.code() == INVALID and "does not parse" in info.value.details(), info.value.details()
    assert_healthy(env_server)
