"""The OTLP receivers: HTTP (`/v1/traces`, protobuf and JSON) and gRPC.

Both hand a decoded request to `Ingest`, which applies the attribute limits and puts it
on the `RequestQueue`; a client hears 200 only once the queue holds its request. What is
refused gets a status saying why, and is counted by reason:

| why | HTTP | gRPC |
|---|---|---|
| missing or wrong bearer token | 401 | UNAUTHENTICATED |
| body over `max_body_bytes` | 413 | RESOURCE_EXHAUSTED |
| more than `max_spans_per_request` spans | 413 | RESOURCE_EXHAUSTED |
| more than `max_items_per_request` attributes, events, links, values | 413 | RESOURCE_EXHAUSTED |
| not protobuf or JSON, unknown encoding | 415 | - |
| not a valid OTLP message (also JSON nested too deep), bad chunked body | 400 | INVALID_ARGUMENT |
| neither Content-Length nor chunked | 411 | - |
| queue or forwarding buffer full | 429 + Retry-After | RESOURCE_EXHAUSTED + RetryInfo |
| queue's store unreachable (Redis down) | 503 + Retry-After | UNAVAILABLE + RetryInfo |
| draining after SIGTERM | 503 | UNAVAILABLE |
| an unexpected error (a bug), logged | 500 | INTERNAL |
| `max_connections` connections open already | 503 + Retry-After, closed | - |
| bodies (OTLP/JSON: and its parse) of `max_bytes_in_flight` at once | 429 + Retry-After | - |
| OTLP/JSON whose parse could cost more than `max_bytes_in_flight` | 413 | - |

The HTTP receiver (`http_receiver`, one event loop for every connection) bounds its
memory at the door: connections (`max_connections`), the bodies it reads at once
(`max_bytes_in_flight`) and the time a request may take to arrive
(`request_timeout_seconds`, for the whole request, not each read: a client sending a
byte a minute is closed, as is a connection idle that long).

A body comes with a Content-Length or `Transfer-Encoding: chunked` (see `chunked`); a
chunked one is refused with 413 as soon as a chunk would pass the limit.

The HTTP receiver also serves `/healthz` (the process is up), `/readyz` (200 while
accepting, not full and the queue's store is reachable; otherwise 503 with the reason in
its JSON body) and `/metrics` (Prometheus).
"""

from __future__ import annotations

import hmac
import logging
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracefact import semconv
from tracefact._imports import import_extra
from tracefact.collector.config import CollectorConfig, ConfigError
from tracefact.collector.decode import (
    PROTOBUF,
    BadRequest,
    decode,
    fits,
    outline,
)
from tracefact.collector.forwarder import Forwarder
from tracefact.collector.limits import apply_limits
from tracefact.collector.metrics import CollectorMetrics
from tracefact.collector.queue import Encoded, QueueFull, QueueUnavailable, RequestQueue

logger = logging.getLogger("tracefact.collector")

TRACES_PATH = "/v1/traces"
GRPC_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


class Refused(Exception):
    """The request is well formed but not taken now: full, or shutting down."""

    def __init__(self, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


class Ingest:
    """What both receivers do with a request: check the token, limit, count, queue."""

    def __init__(
        self,
        config: CollectorConfig,
        queue: RequestQueue,
        forwarder: Forwarder,
        metrics: CollectorMetrics,
        fatal: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.config = config
        self.queue = queue
        self._fatal = fatal  # a fault that cannot clear: the process is about to exit
        self.forwarder = forwarder
        self.metrics = metrics
        self.accepting = True
        self._busy = 0  # accept() calls under way
        self._idle = threading.Condition()
        token = config.auth.bearer_token
        self._expected = f"Bearer {token}".encode() if token else None

    def authorized(self, authorization: str | None) -> bool:
        if self._expected is None:
            return True
        given = (authorization or "").strip().encode()
        return hmac.compare_digest(given, self._expected)

    def unready(self) -> str | None:
        """Why `/readyz` answers 503 (failed, draining, full, the queue unavailable), or None."""
        fatal = self._fatal()
        if fatal is not None:
            return f"failed: {fatal}"
        if not self.accepting:
            return "shutting down"
        if self.forwarder.full():
            return "forwarding buffer full"
        reason = self.queue.unavailable()
        return None if reason is None else f"queue unavailable: {reason}"

    def reject(self, protocol: str, reason: str) -> None:
        self.metrics.rejected.add(1, {"protocol": protocol, "reason": reason})

    def accept(
        self, request: ExportTraceServiceRequest, protocol: str, body: bytes | None = None
    ) -> None:
        """Queue the request (`body`: its protobuf bytes as received), or raise `Refused`."""
        with self._idle:
            self._busy += 1
        try:
            self._accept(request, protocol, body)
        finally:
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    def stop(self, timeout: float) -> None:
        """Accept nothing more; wait for requests being queued (what is queued is drained)."""
        with self._idle:
            self.accepting = False
            self._idle.wait_for(lambda: self._busy == 0, timeout)

    def _accept(
        self, request: ExportTraceServiceRequest, protocol: str, body: bytes | None
    ) -> None:
        retry_after = self.config.forwarding.retry_after_seconds
        if not self.accepting:
            raise Refused(semconv.REJECT_SHUTDOWN, "the collector is shutting down")
        if self.forwarder.full():
            raise Refused(semconv.REJECT_FULL, "forwarding buffer full", retry_after)
        encoded, limited = self._limited(request, body)
        if encoded.spans == 0:
            return  # nothing to forward
        try:
            self.queue.put(encoded)
        except QueueUnavailable as exc:
            raise Refused(semconv.REJECT_UNAVAILABLE, str(exc), exc.retry_after_seconds) from None
        except QueueFull as exc:
            raise Refused(semconv.REJECT_FULL, str(exc), exc.retry_after_seconds) from None
        self.metrics.received.add(encoded.spans, {"protocol": protocol})
        for (limit, where), count in limited.items():
            self.metrics.limited.add(count, {"limit": limit, "where": where})

    def _limited(
        self, request: ExportTraceServiceRequest, body: bytes | None
    ) -> tuple[Encoded, Counter[tuple[str, str]]]:
        """The request within the attribute limits, encoded, and what the limits changed.

        The limits are checked on the request as a whole first: when no span, resource or
        scope of it is long enough to break one (nearly always), no span is looked at and
        the bytes received are what is forwarded. Otherwise the limits are applied span by
        span, and the request is encoded again only if they changed something.
        """
        limits = self.config.limits
        if body is not None:
            shape = outline(body)
            if fits(shape, limits):
                return Encoded(body, shape.spans, request), Counter()
        limited = apply_limits(request, limits)
        if body is None or limited.changes:
            body = request.SerializeToString()
        return Encoded(body, limited.spans, request), limited.changes


# --- HTTP ----------------------------------------------------------------------------------


def port_taken(key: str, host: str, port: int, why: str | None) -> ConfigError:
    """One line naming the setting to change when a receiver cannot listen."""
    reason = why or "in use, or not an address of this machine"
    return ConfigError(f"{key}.port: cannot listen on {host}:{port} ({reason}); set {key}.port")


def _check_free(key: str, host: str, port: int) -> None:
    """Bind `host:port` once as gRPC would (address reuse on), or say which setting to change."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise port_taken(key, host, port, str(exc.strerror)) from None
    family, kind, protocol, _, address = infos[0]
    with socket.socket(family, kind, protocol) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise port_taken(key, host, port, exc.strerror) from None


# --- gRPC ----------------------------------------------------------------------------------


class GrpcReceiver:
    """OTLP/gRPC `TraceService/Export` on a small thread pool."""

    def __init__(self, ingest: Ingest, workers: int = 8) -> None:
        grpc = import_extra("grpc", "collector")
        config = ingest.config
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tracefact-grpc"),
            # gRPC refuses a larger message by the length it declares, before reading it:
            # the servicer sees the refusal and counts it. No SO_REUSEPORT: a port
            # another server holds is an error, not a shared port.
            options=[
                ("grpc.max_receive_message_length", config.limits.max_body_bytes),
                ("grpc.so_reuseport", 0),
            ],
        )
        servicer = _Servicer(ingest, grpc)
        # Streaming in, though clients call it unary (the wire is the same): the servicer
        # runs before the message arrives, so it sees, and counts, gRPC refusing it. Bytes
        # in: a bad message is ours to refuse.
        export = grpc.stream_unary_rpc_method_handler(
            servicer.Export, response_serializer=ExportTraceServiceResponse.SerializeToString
        )
        service = GRPC_SERVICE
        handler = grpc.method_handlers_generic_handler(service, {"Export": export})
        self.server.add_generic_rpc_handlers((handler,))
        receiver = config.receivers.grpc
        assert receiver is not None, "built only when the gRPC receiver is on"
        _check_free("receivers.grpc", receiver.host, receiver.port)  # gRPC would log a C trace
        try:
            self.port: int = self.server.add_insecure_port(f"{receiver.host}:{receiver.port}")
        except RuntimeError:  # gRPC says only "Failed to bind"
            raise port_taken("receivers.grpc", receiver.host, receiver.port, None) from None

    def start(self) -> None:
        self.server.start()

    def stop(self, grace_seconds: float) -> None:
        self.server.stop(grace_seconds).wait(grace_seconds + 1.0)


class _Servicer:
    """`Export`: every refusal and failure answered with a status and counted."""

    def __init__(self, ingest: Ingest, grpc: Any) -> None:
        self.ingest = ingest
        self.grpc = grpc

    def Export(self, messages: Iterator[bytes], context: Any) -> Any:
        codes = self.grpc.StatusCode
        try:
            self._export(messages, dict(context.invocation_metadata()))
        except BadRequest as exc:
            self.ingest.reject("grpc", exc.reason)
            by_status = {401: codes.UNAUTHENTICATED, 413: codes.RESOURCE_EXHAUSTED}
            context.abort(by_status.get(exc.status, codes.INVALID_ARGUMENT), exc.message)
        except Refused as exc:
            self.ingest.reject("grpc", exc.reason)
            full = exc.reason == semconv.REJECT_FULL
            if exc.retry_after is not None:
                code = code_pb2.RESOURCE_EXHAUSTED if full else code_pb2.UNAVAILABLE
                context.set_trailing_metadata(_retry_metadata(exc.message, exc.retry_after, code))
            context.abort(codes.RESOURCE_EXHAUSTED if full else codes.UNAVAILABLE, exc.message)
        except Exception as exc:  # a bug: answered and counted, as over HTTP
            logger.exception("request failed", extra={"event": "request_failed"})
            self.ingest.reject("grpc", semconv.REJECT_INTERNAL)
            context.abort(codes.INTERNAL, f"internal error: {type(exc).__name__}")
        return ExportTraceServiceResponse()

    def _export(self, messages: Iterator[bytes], metadata: dict[str, Any]) -> None:
        if not self.ingest.authorized(metadata.get("authorization")):
            raise BadRequest(401, semconv.REJECT_UNAUTHENTICATED, "missing or wrong bearer token")
        limit = self.ingest.config.limits.max_body_bytes
        try:
            body = next(messages)
        except (StopIteration, self.grpc.RpcError):
            # gRPC refused a message over its limit (the client has RESOURCE_EXHAUSTED) and
            # shows the servicer only that none came; a client that cancelled while
            # sending, or sent none, looks the same, and is counted with it.
            message = f"no message of {limit} bytes or less"
            raise BadRequest(413, semconv.REJECT_TOO_LARGE, message) from None
        request = decode(body, PROTOBUF, self.ingest.config.limits)
        self.ingest.accept(request, "grpc", body)


def _retry_metadata(message: str, seconds: float, code: int) -> tuple[tuple[str, bytes], ...]:
    """A RetryInfo, where OpenTelemetry's exporters look for it (both places)."""
    whole = int(seconds)
    delay = duration_pb2.Duration(seconds=whole, nanos=int((seconds - whole) * 1e9))
    retry = error_details_pb2.RetryInfo(retry_delay=delay)
    detail = any_pb2.Any()
    detail.Pack(retry)
    status = status_pb2.Status(code=code, message=message, details=[detail])
    return (
        ("google.rpc.retryinfo-bin", retry.SerializeToString()),
        ("grpc-status-details-bin", status.SerializeToString()),
    )
