"""Domain exceptions, and their one mapping to gRPC status codes at the servicer edge."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from rlgpt.text import encodable

log = logging.getLogger(__name__)


class RlgptError(Exception):
    """Base of every error the services raise on purpose; carries its gRPC status code."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL


class InvalidArgument(RlgptError):
    """The request is malformed or out of range; the message says which field and why."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(RlgptError):
    """A named thing (session, skill, job, run) does not exist."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(RlgptError):
    """A thing of that name exists already."""

    code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(RlgptError):
    """A server-wide limit (sessions, skills, memory) is reached; retry later or free some."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(RlgptError):
    """The request is valid but the system is not in a state to serve it (e.g. backend not installed)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class DeadlineExceeded(RlgptError):
    """Work did not finish within its time limit."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Unavailable(RlgptError):
    """A dependency (another service, an LLM server) cannot be reached."""

    code = grpc.StatusCode.UNAVAILABLE


class ServiceFailed(Unavailable):
    """Another service did not serve a call: it is unavailable (UNAVAILABLE: gone, unreachable, or short of a service
    it needs itself) or did not answer within the call's deadline.
    Named with its address, so that the caller pauses its work for the service rather than blame the code, answer
    or agent whose call it was (``rlgpt.grpc_client.create_channel(peer=...)`` raises it)."""

    def __init__(self, service: str, address: str, method: str, code: grpc.StatusCode, details: str,
                 deadline_seconds: float | None = None):
        self.service, self.address, self.method = service, address, method
        if code == grpc.StatusCode.DEADLINE_EXCEEDED and deadline_seconds is not None:
            seconds = f"{deadline_seconds:.1f}".rstrip("0").rstrip(".")
            why = f"did not answer {method} within its deadline of {seconds} s"
        else:
            why = f"is unavailable ({method}: {code.name}: {details[:300]})"  # gone, or short of a service it needs
        super().__init__(f"the {service} at {address} {why}")


class ConfigError(RlgptError):
    """Settings are invalid; the message lists every problem found, not only the first."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid settings:\n  - " + "\n  - ".join(self.problems))


F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

SHOWN_CHARS = 60
"""How much of a client value an error message quotes."""
MAX_STATUS_BYTES = 2000
"""Cap of a status message in UTF-8 bytes. gRPC sends it percent-encoded in trailing metadata (at most 3
bytes per byte), and a trailer over the peer's metadata limit (8 KiB by default) turns the whole answer
into RESOURCE_EXHAUSTED, hiding the real status."""
MAX_PROBLEMS = 10
"""Problems listed in one message; the rest are counted."""
MAX_REFUSAL_BYTES = 300
"""A refusal of a client's request (its sizes and values at the edge) stays under this many UTF-8 bytes: the first
problems, then how many more (``join_problems(..., max_bytes=MAX_REFUSAL_BYTES)``)."""


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr`` of a client value for an error message, cut to a short prefix and its size.

    Messages quote what the client sent so it can find the bad field, but a value may be megabytes.
    """
    if isinstance(value, (str, bytes)):
        if len(value) <= limit:
            return repr(value)
        unit = "chars" if isinstance(value, str) else "bytes"
        return f"{value[:limit]!r}... ({len(value)} {unit})"
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} items)" if hasattr(value, "__len__") else ""
    return f"{text[:limit]}...{size}"


def found(value: T | None, problem: str) -> T:
    """``value``, or NotFound saying ``problem`` where a lookup found nothing (None)."""
    if value is None:
        raise NotFound(problem)
    return value


def join_problems(problems: list[str], limit: int = MAX_PROBLEMS, max_bytes: int | None = None) -> str:
    """Joins problems with "; ": at most ``limit`` of them and, with ``max_bytes``, as many as fit under that many
    UTF-8 bytes (a first problem too long on its own is cut); then how many more there are."""
    listed: list[str] = []
    for i, problem in enumerate(problems):
        rest = len(problems) - i - 1
        candidate = "; ".join([*listed, problem]) + (f"; and {rest} more problems" if rest else "")
        if len(listed) == limit or (max_bytes is not None and len(candidate.encode()) >= max_bytes):
            if not listed:  # not even the first fits: cut it, at a character
                more = f"; and {rest} more problems" if rest else ""
                return problem.encode()[:max_bytes - len(more) - 8].decode(errors="ignore") + " ..." + more
            return "; ".join(listed) + f"; and {len(problems) - len(listed)} more problems"
        listed.append(problem)
    return "; ".join(listed)


def cap_message(message: str, max_bytes: int = MAX_STATUS_BYTES) -> str:
    """``message`` made encodable (rlgpt.text: gRPC cannot send a lone surrogate, and fails the whole call) and cut
    to ``max_bytes`` UTF-8 bytes (at a character boundary), saying it was cut."""
    message = encodable(message)
    data = message.encode("utf-8")
    if len(data) <= max_bytes:
        return message
    suffix = f" ... (message cut; {len(data)} bytes)"
    head = data[:max_bytes - len(suffix)].decode("utf-8", errors="ignore")
    return head + suffix


DOWNSTREAM = {grpc.StatusCode.NOT_FOUND: grpc.StatusCode.FAILED_PRECONDITION,
              grpc.StatusCode.INVALID_ARGUMENT: grpc.StatusCode.FAILED_PRECONDITION,
              grpc.StatusCode.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
              grpc.StatusCode.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
              grpc.StatusCode.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
              grpc.StatusCode.DEADLINE_EXCEEDED: grpc.StatusCode.UNAVAILABLE}
"""A refusal by a service this one called (e.g. the learner's Evaluate asking the env server for a skill nobody
registered) as this call's status: the caller's request was fine but what it depends on is not (FAILED_PRECONDITION),
or the other service is full or away. Its INTERNAL or UNKNOWN stays INTERNAL: a bug there."""


def _downstream(exc: grpc.RpcError) -> tuple[grpc.StatusCode, str] | None:
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    if code not in DOWNSTREAM:
        return None
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    return DOWNSTREAM[code], f"a service this call depends on answered {code.name}: {details}"


def _abort(context: grpc.ServicerContext, exc: BaseException, method: str) -> None:
    if isinstance(exc, RlgptError):
        context.abort(exc.code, cap_message(str(exc)))
    if isinstance(exc, grpc.RpcError) and (mapped := _downstream(exc)):
        log.warning("%s: %s", method, mapped[1])
        context.abort(mapped[0], cap_message(mapped[1]))
    log.exception("unexpected error in %s", method)
    context.abort(grpc.StatusCode.INTERNAL,
                  cap_message(f"internal error in {method}: {type(exc).__name__}: {exc}"))


def grpc_errors(method: F) -> F:
    """Maps domain exceptions raised by a servicer method to gRPC status codes.

    Works for unary methods and for (response-)streaming generators. Unexpected exceptions become
    INTERNAL with the exception text and are logged with a traceback; the server keeps serving.
    Every message is made encodable and capped (``cap_message``), so no text quoted in it can fail the answer or
    overflow the trailers.
    """
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def stream_wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
            try:
                yield from method(self, request, context)
            except Exception as exc:
                _abort(context, exc, method.__name__)

        return stream_wrapper  # type: ignore[return-value]

    @functools.wraps(method)
    def unary_wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except Exception as exc:
            _abort(context, exc, method.__name__)

    return unary_wrapper  # type: ignore[return-value]
