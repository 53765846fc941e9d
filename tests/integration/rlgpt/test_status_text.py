"""The servicer edge (rlgpt.errors.grpc_errors) over the real env server's channel: an error whose text UTF-8 cannot
encode (a lone surrogate, from code the server runs) still reaches the client with its own status code and its
message, the surrogate replaced, in a unary call and in a stream; the server healthy after (issue 38, item 1)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from env_server_support import assert_healthy, rpc_error

from rlgpt.errors import NotFound
from rlgpt.text import REPLACEMENT
from rlgpt.v1 import env_pb2


def failing(exc: Exception) -> Any:
    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise exc
    return fail


@pytest.mark.parametrize(("exc", "code", "message"), [
    (NotFound("no page after " + chr(0xD800)), grpc.StatusCode.NOT_FOUND, f"no page after {REPLACEMENT}"),
    (ValueError("broke on " + chr(0xDC00)), grpc.StatusCode.INTERNAL,
     f"internal error in ListSkills: ValueError: broke on {REPLACEMENT}"),
], ids=["domain", "unexpected"])
def test_a_unary_status_keeps_its_code_and_message(env_server, monkeypatch, exc, code, message) -> None:
    monkeypatch.setattr(env_server.servicer.catalog, "page", failing(exc))
    assert rpc_error(env_server.stub.ListSkills, env_pb2.ListSkillsRequest()) == (code, message)
    monkeypatch.undo()
    assert_healthy(env_server)


def test_a_stream_status_keeps_its_code_and_message(env_server, monkeypatch) -> None:
    monkeypatch.setattr(env_server.servicer.sessions, "get", failing(NotFound("no session " + chr(0xD800))))
    requests = iter([env_pb2.StepRequest(session_id="s", actions=[0])])
    with pytest.raises(grpc.RpcError) as info:
        list(env_server.stub.StreamSteps(requests))
    assert (info.value.code(), info.value.details()) == (grpc.StatusCode.NOT_FOUND, f"no session {REPLACEMENT}")
    monkeypatch.undo()
    assert_healthy(env_server)
