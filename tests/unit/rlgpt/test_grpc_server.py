"""A real server on 127.0.0.1 port 0: health, reflection, the servicer edge's status codes, message limits, stop."""

from __future__ import annotations

from rlgpt import errors


def test_error_codes_as_the_client_sees_them() -> None:
    """The mapping itself, so a class whose code changes by mistake is caught here and not only in a servicer."""
    expected = {errors.InvalidArgument: "INVALID_ARGUMENT", errors.NotFound: "NOT_FOUND",
                errors.AlreadyExists: "ALREADY_EXISTS", errors.ResourceExhausted: "RESOURCE_EXHAUSTED",
                errors.FailedPrecondition: "FAILED_PRECONDITION", errors.DeadlineExceeded: "DEADLINE_EXCEEDED",
                errors.Unavailable: "UNAVAILABLE", errors.ConfigError: "INVALID_ARGUMENT"}
    assert {cls: cls.code.name for cls in expected} == expected


