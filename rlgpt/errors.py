"""Domain exceptions, and their one mapping to gRPC status codes at the servicer edge."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

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


class ConfigError(RlgptError):
    """Settings are invalid; the message lists every problem found, not only the first."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid settings:\n  - " + "\n  - ".join(self.problems))


F = TypeVar("F", bound=Callable[..., Any])


def _abort(context: grpc.ServicerContext, exc: BaseException, method: str) -> None:
    if isinstance(exc, RlgptError):
        context.abort(exc.code, str(exc))
    log.exception("unexpected error in %s", method)
    context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}: {type(exc).__name__}: {exc}")


def grpc_errors(method: F) -> F:
    """Maps domain exceptions raised by a servicer method to gRPC status codes.

    Works for unary methods and for (response-)streaming generators. Unexpected exceptions become
    INTERNAL with the exception text and are logged with a traceback; the server keeps serving.
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
