"""Error messages quote client values briefly, and the servicer edge never sends an oversized status."""

from __future__ import annotations

import grpc
import pytest
from fakes.refusal import Refused

from rlgpt.errors import (
    MAX_REFUSAL_BYTES,
    MAX_STATUS_BYTES,
    InvalidArgument,
    cap_message,
    grpc_errors,
    join_problems,
    shown,
)


class _Aborted(Exception):
    pass


class FakeContext:
    """Records what context.abort got; raises as grpc's does."""

    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise _Aborted()


def test_shown_keeps_short_values_and_cuts_long_ones() -> None:
    assert shown("wood") == "'wood'"
    long = "x" * 5_000_000
    text = shown(long)
    assert len(text) < 100 and text.endswith("... (5000000 chars)") and text.startswith("'xxx")
    assert shown(b"y" * 100).endswith("(100 bytes)")
    assert shown(list(range(1000))).endswith("(1000 items)")
    assert shown([1, 2]) == "[1, 2]"


def test_join_problems_counts_the_rest() -> None:
    assert join_problems(["a", "b"]) == "a; b"
    text = join_problems([f"p{i}" for i in range(25)])
    assert text.startswith("p0; p1") and "p10" not in text and text.endswith("and 15 more problems")


def test_join_problems_stays_under_300_bytes() -> None:
    many = [f"skills[{i}] is {10**6} chars; the limit is 128" for i in range(50)]
    text = join_problems(many, max_bytes=MAX_REFUSAL_BYTES)
    assert len(text.encode()) < MAX_REFUSAL_BYTES and f"and {50 - text.count('; the limit')} more problems" in text
    one = join_problems(["\u00e9" * 400], max_bytes=MAX_REFUSAL_BYTES)  # one problem over the cap: cut
    assert len(one.encode()) < MAX_REFUSAL_BYTES and one.endswith("\u00e9 ...")
    assert join_problems(["\u00e9" * 400, "b"], max_bytes=MAX_REFUSAL_BYTES).endswith(" ...; and 1 more problems")
    assert join_problems(many) == "; ".join(many[:10]) + "; and 40 more problems"  # no byte bound unless asked
    assert len(join_problems(["\u00e9" * 400], max_bytes=100).encode()) < 100


def test_cap_message_counts_utf8_bytes_and_cuts_at_a_character() -> None:
    assert cap_message("short") == "short"
    capped = cap_message("é" * 10_000)
    assert len(capped.encode()) <= MAX_STATUS_BYTES and "message cut; 20000 bytes" in capped


def test_cap_message_makes_the_message_encodable() -> None:
    assert cap_message("gave up \ud800") == "gave up \ufffd"
    capped = cap_message("\udc00" * 10_000)  # each becomes U+FFFD, 3 bytes: cut after it is replaced
    assert len(capped.encode()) <= MAX_STATUS_BYTES and "message cut; 30000 bytes" in capped


class _Servicer:
    @grpc_errors
    def unary(self, request: str, context: FakeContext) -> str:
        raise InvalidArgument("bad " + request)

    @grpc_errors
    def crash(self, request: str, context: FakeContext) -> str:
        raise ValueError(request)

    @grpc_errors
    def stream(self, request: str, context: FakeContext):
        yield 1
        raise InvalidArgument("bad " + request)


@pytest.mark.parametrize("method", ["unary", "crash", "stream"])
def test_decorator_caps_every_status_message(method: str) -> None:
    context = FakeContext()
    with pytest.raises(_Aborted):
        result = getattr(_Servicer(), method)("v" * 5_000_000, context)
        list(result)
    expected = grpc.StatusCode.INTERNAL if method == "crash" else grpc.StatusCode.INVALID_ARGUMENT
    assert context.code == expected
    assert len(context.details.encode()) <= MAX_STATUS_BYTES and "message cut" in context.details


class _Caller:
    @grpc_errors
    def call(self, request: Refused, context: FakeContext) -> str:
        raise request


@pytest.mark.parametrize(("downstream", "expected"), [
    (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE),
    (grpc.StatusCode.INTERNAL, grpc.StatusCode.INTERNAL)])
def test_a_refusal_by_a_service_called_is_not_this_services_internal_error(downstream: grpc.StatusCode,
                                                                           expected: grpc.StatusCode) -> None:
    """A real run's final evaluation read 'INTERNAL: internal error in Evaluate' for the env server's NOT_FOUND of
    a skill the planner had not registered again after a resume."""
    context = FakeContext()
    with pytest.raises(_Aborted):
        _Caller().call(Refused(downstream, "no skill named 'x'; register it first (RegisterSkill)"), context)
    assert context.code == expected and "no skill named 'x'" in context.details
    assert ("depends on answered NOT_FOUND" in context.details) == (downstream == grpc.StatusCode.NOT_FOUND)
