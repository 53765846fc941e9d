"""How many calls a gRPC server serves at once where a call holds a thread long (:class:`CallSlots`, which
:func:`rlgpt.grpc_server.create_server` installs): a stream for as long as it is open, a long unary call (a skill's
test episodes, an evaluation, an LLM verdict) until it ends. A call beyond its limit is refused at once with
RESOURCE_EXHAUSTED instead of waiting for a thread, so that health checks and Describe never wait behind them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from rlgpt import metrics
from rlgpt.grpc_client import BUSY


class CallSlots(grpc.ServerInterceptor):
    """Serves at most ``streams[service]`` streaming calls of each service at once, and at most
    ``long_calls[service][method]`` calls of each long unary method; one more is refused at once with
    RESOURCE_EXHAUSTED rather than queued for a thread (a long call's refusal carries :data:`BUSY`, which a client
    may wait on). A slot is freed when its call ends, however it ends."""

    def __init__(self, streams: dict[str, int], long_calls: dict[str, dict[str, int]]):
        self._streams = streams
        self._free = {name: threading.BoundedSemaphore(limit) for name, limit in streams.items()}
        self._long = long_calls
        self._long_free = {(service, method): threading.BoundedSemaphore(limit)
                           for service, methods in long_calls.items() for method, limit in methods.items()}

    def intercept_service(self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        service, _, method = handler_call_details.method.strip("/").partition("/")
        if handler.unary_unary is not None:
            free = self._long_free.get((service, method))
            return handler if free is None else self._long_call(handler, free, service, method)
        free = self._free.get(service)
        if free is None:  # not mounted by create_server: nothing to count
            return handler
        refusal = (f"{service.rsplit('.', 1)[-1]} serves at most {self._streams[service]} streams at once (this "
                   f"{method} would be one more); close one or retry later")

        def take(context: grpc.ServicerContext) -> Callable[[], None]:
            """A slot, and the function that gives it back (once); aborts the call when none is free."""
            if not free.acquire(blocking=False):
                metrics.GRPC_STREAMS_REFUSED.labels(service).inc()
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
            lock, held = threading.Lock(), [True]

            def give_back() -> None:
                with lock:
                    if held[0]:
                        held[0] = False
                        free.release()

            context.add_callback(give_back)  # a call the client cancels or drops ends here too
            return give_back

        if handler.unary_stream or handler.stream_stream:
            inner = handler.unary_stream or handler.stream_stream

            def streamed(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                give_back = take(context)
                try:
                    yield from inner(request, context)
                finally:
                    give_back()

            make = (grpc.unary_stream_rpc_method_handler if handler.unary_stream
                    else grpc.stream_stream_rpc_method_handler)
            return make(streamed, request_deserializer=handler.request_deserializer,
                        response_serializer=handler.response_serializer)

        def answered(requests: Any, context: grpc.ServicerContext) -> Any:
            give_back = take(context)
            try:
                return handler.stream_unary(requests, context)
            finally:
                give_back()

        return grpc.stream_unary_rpc_method_handler(answered, request_deserializer=handler.request_deserializer,
                                                    response_serializer=handler.response_serializer)

    def _long_call(self, handler: Any, free: threading.BoundedSemaphore, service: str, method: str) -> Any:
        """The long unary ``method``'s handler, served while one of its slots is free (the call's thread stays busy
        until the servicer returns, whether or not the client still waits)."""
        limit, inner = self._long[service][method], handler.unary_unary
        refusal = (f"{service.rsplit('.', 1)[-1]} serves at most {limit} {method} calls at once, each on a thread of "
                   "its own (this one would be one more); retry later, once one of them has ended")

        def gated(request: Any, context: grpc.ServicerContext) -> Any:
            if not free.acquire(blocking=False):
                context.set_trailing_metadata((BUSY,))
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
            try:
                return inner(request, context)
            finally:
                free.release()

        return grpc.unary_unary_rpc_method_handler(gated, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)
