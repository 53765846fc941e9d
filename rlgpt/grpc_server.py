"""``create_server(addr, services) -> (server, port)``: gRPC servers with health, reflection and graceful stop.

A streaming call holds one of the server's threads for as long as it is open, and so does a long unary call (a
skill's test episodes, an evaluation, an LLM verdict) until it ends. So that neither can starve the server (a call
queued for a thread waits, and every unary call, health checks included, waits behind it), each service serves at
most its ``max_streams`` streams and, of each long unary method its request limits name (``calls_at_once``), that
many calls at once, and refuses one more at once with RESOURCE_EXHAUSTED; the thread pool has a thread for each of
those calls plus ``max_workers`` threads kept for the other unary calls (health, Describe, Step)."""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from rlgpt import metrics
from rlgpt.call_slots import CallSlots
from rlgpt.errors import InvalidArgument
from rlgpt.grpc_client import KEEPALIVE_MS
from rlgpt.request_limits import RequestLimits, check_request

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ServiceBinding:
    """One servicer to mount: its full proto name, the generated ``add_*_to_server`` and the instance."""

    name: str
    add_to_server: Callable[[Any, grpc.Server], None]
    servicer: Any


class _MetricsInterceptor(grpc.ServerInterceptor):
    """Counts calls by method and status code and times them (``rlgpt_grpc_*``)."""

    def __init__(self, server_label: str):
        self._server = server_label

    def intercept_service(self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler  # streams are counted by the servicers themselves
        method = handler_call_details.method.rsplit("/", 1)[-1]
        inner = handler.unary_unary
        server = self._server

        def timed(request: Any, context: grpc.ServicerContext) -> Any:
            start = time.perf_counter()
            code = "OK"
            try:
                return inner(request, context)
            except Exception:
                code = context.code().name if context.code() else "UNKNOWN"
                raise
            finally:
                metrics.GRPC_REQUESTS.labels(server, method, code).inc()
                metrics.GRPC_SECONDS.labels(server, method).observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            timed, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


class _Undecodable:
    """A request whose bytes do not parse as its message (e.g. a string field holding invalid UTF-8)."""

    def __init__(self, error: Exception):
        self.message = f"the request does not parse as a protobuf message of this method's type: {error}"


class _RequestCheckInterceptor(grpc.ServerInterceptor):
    """Refuses, with INVALID_ARGUMENT, a request that does not parse (grpc itself would answer INTERNAL) or that
    breaks its service's ``request_limits`` (:mod:`rlgpt.request_limits`), before the servicer sees it."""

    def __init__(self, limits: dict[str, RequestLimits]):
        self._limits = limits
        """Each service's limits, by its full proto name."""

    @staticmethod
    def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
        if deserializer is None:
            return None

        def parse(data: bytes) -> Any:
            try:
                return deserializer(data)
            except Exception as exc:  # DecodeError, or whatever a custom deserializer raises
                return _Undecodable(exc)

        return parse

    def intercept_service(self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        limits = self._limits.get(handler_call_details.method.strip("/").split("/", 1)[0])

        def refusal(request: Any) -> str:
            if isinstance(request, _Undecodable):
                return request.message
            return check_request(request, limits) if limits is not None else ""

        parse = self._tolerant(handler.request_deserializer)
        if handler.unary_unary or handler.unary_stream:
            inner = handler.unary_unary or handler.unary_stream

            def unary(request: Any, context: grpc.ServicerContext) -> Any:
                if problem := refusal(request):
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
                return inner(request, context)

            make = (grpc.unary_unary_rpc_method_handler if handler.unary_unary
                    else grpc.unary_stream_rpc_method_handler)
            return make(unary, request_deserializer=parse, response_serializer=handler.response_serializer)
        inner_stream = handler.stream_unary or handler.stream_stream

        def checked(requests: Any) -> Any:
            for request in requests:
                if problem := refusal(request):
                    raise InvalidArgument(problem)  # the servicer's grpc_errors maps it
                yield request

        def streaming(requests: Any, context: grpc.ServicerContext) -> Any:
            return inner_stream(checked(requests), context)

        make = grpc.stream_unary_rpc_method_handler if handler.stream_unary else grpc.stream_stream_rpc_method_handler
        return make(streaming, request_deserializer=parse, response_serializer=handler.response_serializer)


def stream_limits(services: Sequence[ServiceBinding], default: int) -> dict[str, int]:
    """Streams each mounted service serves at once: its servicer's ``max_streams``, else ``default`` (health's
    Watch and reflection get ``default`` too)."""
    limits = {b.name: int(getattr(b.servicer, "max_streams", default)) for b in services}
    return {**limits, health.SERVICE_NAME: default, reflection.SERVICE_NAME: default}


def request_limits(services: Sequence[ServiceBinding]) -> dict[str, RequestLimits]:
    """The limits each servicer declares (its ``request_limits``), by its service's name."""
    return {b.name: b.servicer.request_limits for b in services if hasattr(b.servicer, "request_limits")}


def long_call_limits(services: Sequence[ServiceBinding]) -> dict[str, dict[str, int]]:
    """The long unary methods of each mounted service and how many calls of each it serves at once (its request
    limits' ``calls_at_once``)."""
    return {name: dict(limits.calls_at_once) for name, limits in request_limits(services).items()
            if limits.calls_at_once}


def create_server(addr: str, services: Sequence[ServiceBinding], *, max_workers: int = 16, max_streams: int = 16,
                  max_message_mb: int = 64, metrics_label: str = "") -> tuple[grpc.Server, int]:
    """Builds and starts a server on ``addr`` ("host:port"; port 0 picks a free one).

    Every request of a servicer that declares ``request_limits`` is checked against them before it runs. Each
    service serves at most its servicer's ``max_streams`` streaming calls at once (``max_streams`` where it
    declares none), and of each long unary method its request limits name, their ``calls_at_once``; the pool has
    ``max_workers`` threads for the other unary calls besides one for each of those streams and long calls.
    Mounts the servicers plus ``grpc.health.v1.Health`` (each service and "" report SERVING) and
    server reflection. Returns the started server and the bound port. Stop it with
    :func:`stop_server` so health turns NOT_SERVING before in-flight calls drain.
    """
    limit = max_message_mb * 1024 * 1024
    streams, long_calls = stream_limits(services, max_streams), long_call_limits(services)
    threads = max_workers + sum(streams.values()) + sum(sum(methods.values()) for methods in long_calls.values())
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
        # The metrics first: a long call refused for want of a slot is counted (code RESOURCE_EXHAUSTED).
        interceptors=[_MetricsInterceptor(metrics_label or (services[0].name if services else "none")),
                      CallSlots(streams, long_calls), _RequestCheckInterceptor(request_limits(services))],
        options=[
            ("grpc.max_send_message_length", limit),
            ("grpc.max_receive_message_length", limit),
            ("grpc.so_reuseport", 0),
            # The clients' keepalive pings during a quiet stream (WatchRun, WatchJob) are welcome: by default a
            # server takes pings more often than every 5 min as abuse and closes the connection.
            ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
            ("grpc.http2.max_ping_strikes", 0),
        ],
    )
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for binding in services:
        binding.add_to_server(binding.servicer, server)
    names = [b.name for b in services]
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    try:
        port = server.add_insecure_port(addr)
    except RuntimeError:  # grpc >= 1.6x raises instead of returning 0
        port = 0
    if port == 0:
        raise OSError(f"could not bind the gRPC server to {addr}: the port is taken or the address is not one of "
                      "this machine's; pick another port (0 picks a free one)")
    server.start()
    for name in ["", *names]:
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    server.rlgpt_health = health_servicer  # type: ignore[attr-defined]  # read by stop_server
    server.rlgpt_services = services  # type: ignore[attr-defined]
    log.info("gRPC server listening on %s (port %d): %s", addr, port, ", ".join(names))
    return server, port


def stop_server(server: grpc.Server, grace_seconds: float = 5.0) -> None:
    """Graceful stop: health NOT_SERVING, new calls refused, in-flight calls get ``grace_seconds``."""
    health_servicer = getattr(server, "rlgpt_health", None)
    if health_servicer is not None:
        health_servicer.enter_graceful_shutdown()
    for binding in getattr(server, "rlgpt_services", ()):
        close = getattr(binding.servicer, "close", None)
        if close is not None:
            close()
    server.stop(grace_seconds).wait()
    log.info("gRPC server stopped")


def serve_until_signal(server: grpc.Server, grace_seconds: float, ready: Callable[[], None] | None = None) -> None:
    """Blocks until SIGTERM or SIGINT, then stops the server gracefully (container- and --init-safe). ``ready`` is
    called once the handlers are in place, so that a signal sent as soon as it has run is handled."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if ready is not None:
        ready()
    stop.wait()
    stop_server(server, grace_seconds)
