"""The one check of request sizes and values (rlgpt.request_limits): every string, bytes, repeated, map and float
field found through the proto descriptors, each problem named by its field's path, the message under 300 bytes."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import FieldDescriptor

from rlgpt.errors import MAX_REFUSAL_BYTES
from rlgpt.request_limits import RequestLimits, character_problem, check_request
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, learner_pb2, planner_pb2  # noqa: F401  (loads planner.proto)
from services.critic.limits import critic_limits
from services.critic.settings import CriticSettings
from services.env_server.limits import env_limits
from services.env_server.settings import EnvServerSettings
from services.learner.limits import LEARNER_LIMITS
from services.planner.limits import PLANNER_LIMITS

LIMITS = RequestLimits(name_chars=8, text_chars=20, list_entries=3, max_bytes=10,
                       text_fields=frozenset({"TaskSpec.description", "EpisodeSummary.text"}),
                       fields={"EvaluateRequest.checkpoint": 12, "JudgeRequest.frames": 2})


def problems(request) -> list[str]:
    return LIMITS.problems(request)


def test_a_request_within_every_limit_has_no_problem() -> None:
    request = learner_pb2.EvaluateRequest(
        checkpoint="a/b/c.pth", episodes=2**31 - 1, seed=-(2**63),
        task=common_pb2.TaskSpec(name="tree", description="get\twood,\nthen go",
                                 success=[common_pb2.Condition(achievement="wood")] * 3))
    assert problems(request) == [] and check_request(request, LIMITS) == ""
    assert problems(learner_pb2.EvaluateRequest()) == []


def test_strings_by_kind_and_by_field() -> None:
    task = common_pb2.TaskSpec(name="n" * 9, description="d" * 21)
    assert problems(learner_pb2.EvaluateRequest(task=task, checkpoint="c" * 13, job_id="j" * 8)) == [
        "checkpoint is 13 chars; the limit is 12",
        "task.name is 9 chars; the limit is 8", "task.description is 21 chars; the limit is 20"]


def test_a_repeated_field_over_its_limit_is_counted_not_walked() -> None:
    huge = common_pb2.TaskSpec(success=[common_pb2.Condition(achievement="x" * 1000)] * 100_000)
    assert problems(learner_pb2.EvaluateRequest(task=huge)) == ["task.success has 100000 entries; the limit is 3"]
    nested = learner_pb2.EvaluateRequest(chain=[learner_pb2.ChainLink(
        name="a", success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="\x00"))])])
    assert problems(nested) == ["chain[0].success[0].inventory.item holds a control character ('\\x00' at 0); a name "
                                "holds no control characters"]


def test_bytes_fields_and_repeated_bytes() -> None:
    request = critic_pb2.JudgeRequest(frames=[b"x" * 11, b"ok"],
                                      rollouts=[common_pb2.EpisodeSummary(animation=b"y" * 11)])
    assert problems(request) == ["rollouts[0].animation is 11 bytes; the limit is 10",
                                 "frames[0] is 11 bytes; the limit is 10"]
    assert problems(critic_pb2.JudgeRequest(frames=[b""] * 3)) == ["frames has 3 entries; the limit is 2"]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_floats_and_doubles_are_finite(value: float) -> None:
    config = learner_pb2.RLConfig(learning_rate=value, reward_terms=[common_pb2.RewardTerm(kind="k", weight=value)])
    assert problems(learner_pb2.StartTrainingRequest(config=config)) == [
        f"config.reward_terms[0].weight is {value}; it must be a finite number",
        f"config.learning_rate is {value}; it must be a finite number"]
    assert problems(critic_pb2.CurvePoint(mean_return=value)) == [f"mean_return is {value}; it must be a finite number"]


def test_map_keys_and_values() -> None:
    progress = learner_pb2.JobProgress(action_shares={"noop": 0.5, "z\x1b[0m": float("nan")})
    assert problems(progress) == [
        "action_shares[1].key holds a control character ('\\x1b' at 1); a name holds no control characters",
        "action_shares[1].value is nan; it must be a finite number"]
    assert problems(learner_pb2.JobProgress(action_shares=dict.fromkeys("abcd", 0.1))) == [
        "action_shares has 4 entries; the limit is 3"]


def test_characters_names_and_text() -> None:
    assert character_problem("move_left", text=False) == ""
    assert character_problem("a\tb", text=False).startswith("holds a control character ('\\t' at 1)")
    assert character_problem("\x85", text=False).startswith("holds a control character")  # C1 too
    assert character_problem("def f():\n\treturn 1\r\n\x0c", text=True) == ""
    assert character_problem("a\x00b", text=True) == "holds a control character ('\\x00' at 1); text holds no NUL"
    for text in (False, True):
        assert character_problem("ok\ud800", text).startswith("holds a lone surrogate ('\\ud800' at 2)")
    assert character_problem("hi \u00e9\u4e2d\U0001f600", text=False) == ""  # any printable character is fine


def test_a_huge_request_is_refused_in_a_short_message() -> None:
    request = env_pb2.CreateSessionRequest(backend="b" * 5_000_000, skills=["s"] * 100_000, client="\x07",
                                           task=common_pb2.TaskSpec(description="\x00" * 5_000_000))
    message = check_request(request, LIMITS)
    assert len(message.encode()) < MAX_REFUSAL_BYTES and "backend is 5000000 chars; the limit is 8" in message
    assert "\x00" not in message and "bbbbbbbbb" not in message


def test_limits_as_clients_read_them() -> None:
    reported = LIMITS.to_proto()
    assert (reported.max_name_chars, reported.max_text_chars, reported.max_list_entries, reported.max_bytes) == \
        (8, 20, 3, 10)
    assert list(reported.text_fields) == ["EpisodeSummary.text", "TaskSpec.description"]
    assert dict(reported.fields) == {"EvaluateRequest.checkpoint": 12, "JudgeRequest.frames": 2}


@pytest.mark.parametrize("limits", [
    env_limits(EnvServerSettings()), critic_limits(CriticSettings()), LEARNER_LIMITS, PLANNER_LIMITS],
    ids=["env_server", "critic", "learner", "planner"])
def test_every_service_names_real_fields(limits: RequestLimits) -> None:
    """A misspelt field in a service's limits would bound nothing: each names a field of rlgpt.v1, text a string."""
    pool = descriptor_pool.Default()
    for key in [*limits.fields, *limits.text_fields]:
        message, field = key.split(".")
        assert field in pool.FindMessageTypeByName(f"rlgpt.v1.{message}").fields_by_name, key
    for key in limits.text_fields:
        message, field = key.split(".")
        assert pool.FindMessageTypeByName(f"rlgpt.v1.{message}").fields_by_name[field].type == \
            FieldDescriptor.TYPE_STRING, key


@pytest.mark.parametrize(("limits", "service"), [
    (env_limits(EnvServerSettings()), "EnvService"), (critic_limits(CriticSettings()), "CriticService"),
    (LEARNER_LIMITS, "LearnerService"), (PLANNER_LIMITS, "PlannerService")],
    ids=["env_server", "critic", "learner", "planner"])
def test_every_long_call_is_a_unary_method_of_its_service(limits: RequestLimits, service: str) -> None:
    """A misspelt method would be bounded nowhere: each of ``calls_at_once`` is a unary RPC of the service, served
    at least once at a time, and reported as it is declared."""
    methods = descriptor_pool.Default().FindServiceByName(f"rlgpt.v1.{service}").methods_by_name
    for name, at_once in limits.calls_at_once.items():
        assert name in methods and at_once >= 1, name
        assert not methods[name].client_streaming and not methods[name].server_streaming, name
    assert dict(limits.to_proto().calls_at_once) == dict(limits.calls_at_once)
    assert service == "PlannerService" or limits.calls_at_once  # the env server's, learner's and critic's are long
