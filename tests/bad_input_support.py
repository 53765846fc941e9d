"""Bad requests generated from a service's proto descriptors, sent over a real channel (issue 38).

For every RPC of a service, every field of its request message (nested ones too, through a first entry of each
repeated message) gets one call per kind of bad value: strings and bytes of 5 MB, a control character and a lone
surrogate in a string (sent as the invalid UTF-8 a client in another language could send), 100,000 entries in a
repeated or map field, NaN and infinity in a float, the extremes of an integer and an enum value no one defined.
Each call sets one field on the RPC's base request. :func:`assert_answered_well` checks the answer: never INTERNAL
or UNKNOWN, a message under 300 bytes that quotes no more than a short prefix of what was sent, INVALID_ARGUMENT
for every value no field may hold.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor, MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc

HUGE = 5 * 1024 * 1024
MANY = 100_000
CONTROL = "a\x00b\x1b[31m\x07"
MARKER = "\ue000"
"""Stands for a lone surrogate while the message is built (protobuf refuses to encode one); swapped for the bytes
ED A0 80 (U+D800 as a careless UTF-8 encoder writes it) once serialized."""
SURROGATE_BYTES = b"\xed\xa0\x80"
MAX_DETAILS_BYTES = 300
BAD_CODES = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
MAYBE_VALID = ("max", "min", "enum_max", "enum_min")
"""Kinds of value some fields accept (a seed takes any int64)."""
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1), FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1), FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1), FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1)}
_FLOATS = (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE)


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad call: the RPC, the field's path in its request, the kind of bad value; ``build`` makes the request's
    bytes when the call is made (the cases of a service hold hundreds of megabytes)."""

    method: MethodDescriptor
    path: str
    kind: str
    build: Callable[[], bytes]

    @property
    def id(self) -> str:
        return f"{self.method.name}:{self.path}:{self.kind}"


def _values(field: FieldDescriptor) -> dict[str, Any]:
    """The bad values of one scalar field, by kind."""
    if field.type == FieldDescriptor.TYPE_STRING:
        return {"5mb": "x" * HUGE, "control": CONTROL, "surrogate": f"ok{MARKER}"}
    if field.type == FieldDescriptor.TYPE_BYTES:
        return {"5mb": b"x" * HUGE}
    if field.type in _FLOATS:
        return {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
    if field.type in _INT_RANGES:
        low, high = _INT_RANGES[field.type]
        return {"max": high, "min": low}
    if field.type == FieldDescriptor.TYPE_ENUM:
        return {"enum_max": 2**31 - 1, "enum_min": -(2**31)}
    return {}


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _place(root: Message, steps: tuple[FieldDescriptor, ...]) -> Message:
    """The message at ``steps`` below ``root``, made present (a repeated message gets a first entry)."""
    message = root
    for step in steps:
        if step.is_repeated:
            container = getattr(message, step.name)
            message = container[0] if len(container) else container.add()
        else:
            message = getattr(message, step.name)
            message.SetInParent()
    return message


def _variants(field: FieldDescriptor) -> Iterator[tuple[str, Callable[[Message], None]]]:
    """(kind, how to set it on the field's message) for every bad value of one field."""
    name = field.name
    if _is_map(field):
        key = field.message_type.fields_by_name["key"]

        def entries(m: Message, keys: list[Any]) -> None:
            target = getattr(m, name)
            for k in keys:
                target[k]  # reading a map's key adds the entry, with a default value

        yield "many", lambda m: entries(m, [str(i) if key.type == FieldDescriptor.TYPE_STRING else i
                                            for i in range(MANY)])
        for kind, bad in _values(key).items():
            yield f"key_{kind}", lambda m, bad=bad: entries(m, [bad])
        return
    if field.is_repeated:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            yield "many", lambda m: getattr(m, name).extend([GetMessageClass(field.message_type)()] * MANY)
            return
        filler = "a" if field.type == FieldDescriptor.TYPE_STRING else b"" if field.type == \
            FieldDescriptor.TYPE_BYTES else False if field.type == FieldDescriptor.TYPE_BOOL else 0
        yield "many", lambda m: getattr(m, name).extend([filler] * MANY)
        for kind, bad in _values(field).items():
            yield kind, lambda m, bad=bad: getattr(m, name).append(bad)
        return
    for kind, bad in _values(field).items():
        yield kind, lambda m, bad=bad: setattr(m, name, bad)


def _fields(descriptor: Any, steps: tuple[FieldDescriptor, ...] = ()) -> Iterator[tuple[tuple[FieldDescriptor, ...],
                                                                                      FieldDescriptor]]:
    """Every field below ``descriptor`` with the steps to the message that holds it (a message type once per path)."""
    seen = {s.message_type.full_name for s in steps}
    for field in descriptor.fields:
        yield steps, field
        if field.type == FieldDescriptor.TYPE_MESSAGE and not _is_map(field) and \
                field.message_type.full_name not in seen and len(steps) < 6:
            yield from _fields(field.message_type, (*steps, field))


def bad_cases(service: ServiceDescriptor, bases: Mapping[str, Message] | None = None,
              skip: Callable[[str, str], bool] = lambda rpc, path: False) -> list[Case]:
    """Every bad call of ``service``: each field of each RPC's request (on ``bases[rpc]``, or an empty request)
    with each kind of bad value; ``skip(rpc, path)`` leaves fields out."""
    cases = []
    for method in service.methods:
        base = (bases or {}).get(method.name) or GetMessageClass(method.input_type)()
        for steps, field in _fields(method.input_type):
            path = ".".join([*(s.name for s in steps), field.name])
            if skip(method.name, path):
                continue
            for kind, set_bad in _variants(field):
                cases.append(Case(method, path, kind, functools.partial(_request, base, steps, set_bad, kind)))
    return cases


def _request(base: Message, steps: tuple[FieldDescriptor, ...], set_bad: Callable[[Message], None], kind: str
             ) -> bytes:
    request = type(base)()
    request.CopyFrom(base)
    set_bad(_place(request, steps))
    data = request.SerializeToString()
    return data.replace(MARKER.encode(), SURROGATE_BYTES) if kind.endswith("surrogate") else data


def call(channel: grpc.Channel, case: Case, timeout: float = 60) -> tuple[grpc.StatusCode, str]:
    """(code, details) of one raw call; a stream's first answers are read, then it is cancelled."""
    name = f"/{case.method.containing_service.full_name}/{case.method.name}"
    try:
        if case.method.client_streaming:
            replies = channel.stream_stream(name)(iter([case.build()]), timeout=timeout)
        elif case.method.server_streaming:
            replies = channel.unary_stream(name)(case.build(), timeout=timeout)
        else:
            channel.unary_unary(name)(case.build(), timeout=timeout)
            return grpc.StatusCode.OK, ""
        for _, _reply in zip(range(3), replies, strict=False):
            pass
        replies.cancel()
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""


def assert_answered_well(case: Case, code: grpc.StatusCode, details: str) -> None:
    """Not INTERNAL nor UNKNOWN; a short message that quotes no more than a short prefix of the value. A value no
    field may hold (all but an integer's extremes, which some fields take) is INVALID_ARGUMENT; a size beyond the
    limits names the limit."""
    assert code not in BAD_CODES, (case.id, code, details[:300])
    if case.kind not in MAYBE_VALID:
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (case.id, code, details[:300])
    if case.kind in ("5mb", "many", "key_5mb"):
        assert "the limit is" in details, (case.id, details[:300])
    assert len(details.encode()) < MAX_DETAILS_BYTES, (case.id, len(details.encode()), details[:300])
    assert "x" * 100 not in details, (case.id, details[:300])


def assert_serving(channel: grpc.Channel, service: str) -> None:
    """The health service answers SERVING for ``service`` within a second."""
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=1)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def check_case(channel: grpc.Channel, case: Case, service: str) -> None:
    """Makes the call of ``case``; its answer is a good one and the server still serves ``service``."""
    code, details = call(channel, case)
    assert_answered_well(case, code, details)
    assert_serving(channel, service)
