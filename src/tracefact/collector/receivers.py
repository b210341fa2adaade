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

The HTTP receiver bounds its memory at the door: connections (`max_connections`), the
bodies it reads at once (`max_bytes_in_flight`) and the time a request may take to
arrive (`request_timeout_seconds`, for the whole request, not each read: a client
sending a byte a minute is closed, as is a connection idle that long).

A body comes with a Content-Length or `Transfer-Encoding: chunked` (see `chunked`); a
chunked one is refused with 413 as soon as a chunk would pass the limit.

The HTTP receiver also serves `/healthz` (the process is up), `/readyz` (200 while
accepting, not full and the queue's store is reachable; otherwise 503 with the reason in
its JSON body) and `/metrics` (Prometheus).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import math
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracefact import semconv
from tracefact._imports import import_extra
from tracefact.collector.chunked import read_chunked
from tracefact.collector.config import CollectorConfig, ConfigError
from tracefact.collector.decode import (
    JSON,
    PROTOBUF,
    BadRequest,
    decode,
    decompress,
    fits,
    json_cost,
    media_type,
    outline,
)
from tracefact.collector.forwarder import Forwarder
from tracefact.collector.limits import apply_limits
from tracefact.collector.metrics import CollectorMetrics
from tracefact.collector.queue import Encoded, QueueFull, QueueUnavailable, RequestQueue
from tracefact.prometheus import CONTENT_TYPE as METRICS_CONTENT_TYPE

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


class HttpReceiver:
    """OTLP/HTTP plus health and metrics, one thread per connection."""

    def __init__(self, ingest: Ingest, render_metrics: Callable[[], bytes]) -> None:
        self.ingest = ingest
        receiver = ingest.config.receivers.http
        assert receiver is not None, "built only when the HTTP receiver is on"
        host, port = receiver.host, receiver.port
        limits = ingest.config.limits
        budget = _Budget(limits.max_bytes_in_flight)
        attributes = {"ingest": ingest, "render": render_metrics, "budget": budget}
        attributes["timeout"] = limits.request_timeout_seconds
        handler = type("Handler", (_Handler,), attributes)
        try:
            self.server = _Server((host, port), handler, ingest)
        except OSError as exc:
            raise port_taken("receivers.http", host, port, exc.strerror) from None
        self.server.daemon_threads = True
        self.port: int = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="tracefact-http", daemon=True
        )
        self._reaper = threading.Thread(
            target=self.server.reap, name="tracefact-http-deadlines", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        self._reaper.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.stop_reaping()
        self.server.server_close()


class _Budget:
    """Bytes of request bodies being read and decoded at once; never waits."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        with self._lock:
            if self._used + size > self.limit:
                return False
            self._used += size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self._used -= size


class _Server(ThreadingHTTPServer):
    """The stdlib's threading server, bounded: connections, and each request's deadline.

    A thread per connection, at most `max_connections`; one more is answered 503 at
    once. Each connection has a deadline, `request_timeout_seconds` after it opened or
    after its last reply; a reaper thread closes the connections past theirs.
    """

    request_queue_size = 1024
    """Connections the kernel holds before one is accepted: the stdlib's 5 left hundreds of
    clients connecting at once waiting for SYN retries (seconds each)."""

    def __init__(self, address: tuple[str, int], handler: type[_Handler], ingest: Ingest) -> None:
        super().__init__(address, handler)
        limits = ingest.config.limits
        self.ingest = ingest
        self.max_connections = limits.max_connections
        self.request_timeout = limits.request_timeout_seconds
        self._deadlines: dict[socket.socket, float] = {}  # open connections, by deadline
        self._lock = threading.Lock()  # guards _deadlines
        self._stop = threading.Event()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            full = len(self._deadlines) >= self.max_connections
            if not full:
                self._deadlines[request] = time.monotonic() + self.request_timeout
        if not full:
            super().process_request(request, client_address)
            return
        self.ingest.reject("http", semconv.REJECT_CONNECTIONS)
        retry_after = max(1, math.ceil(self.ingest.config.forwarding.retry_after_seconds))
        body = b"too many connections\n"
        reply = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: {retry_after}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + body
        try:
            request.settimeout(1.0)
            request.sendall(reply)
        except OSError:
            pass  # the client is gone: nothing to tell it
        self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._deadlines.pop(request, None)

    def replied(self, request: Any) -> None:
        """A reply went out: the connection's next request gets a full deadline."""
        with self._lock:
            if request in self._deadlines:
                self._deadlines[request] = time.monotonic() + self.request_timeout

    def reap(self) -> None:
        """Close the connections past their deadline, until `stop_reaping`."""
        interval = min(1.0, self.request_timeout / 4)
        while not self._stop.wait(interval):
            now = time.monotonic()
            with self._lock:
                late = [conn for conn, deadline in self._deadlines.items() if deadline <= now]
            for connection in late:
                with contextlib.suppress(OSError):  # its thread's read ends, and the thread
                    connection.shutdown(socket.SHUT_RDWR)

    def stop_reaping(self) -> None:
        self._stop.set()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection's failure, as one JSON log line (the stdlib prints a traceback).

        A client that went away mid-reply is routine: logged at debug.
        """
        error = sys.exc_info()[1]
        if isinstance(error, (BrokenPipeError, ConnectionResetError, TimeoutError)):
            logger.debug("client went away", extra={"event": "client_gone"})
            return
        logger.error("connection failed", exc_info=True, extra={"event": "connection_failed"})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse their connection
    timeout = 30  # per read; the whole request's deadline is the server's
    server_version = "tracefact-collector"
    ingest: Ingest
    render: Callable[[], bytes]
    budget: _Budget

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: requests are counted in metrics, not logged one by one."""

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/healthz":
            self._reply(200, b'{"status": "ok"}\n', "application/json")
        elif path == "/readyz":
            reason = self.ingest.unready()
            state = (
                {"status": "ready"} if reason is None else {"status": "not ready", "reason": reason}
            )
            body = json.dumps(state).encode() + b"\n"
            self._reply(200 if reason is None else 503, body, "application/json")
        elif path == "/metrics":
            self._reply(200, type(self).render(), METRICS_CONTENT_TYPE)
        else:
            self._reply(404, b"not found\n", "text/plain")

    def do_POST(self) -> None:
        if self.path.split("?")[0] != TRACES_PATH:
            self._discard_body()
            self._reply(404, b"not found: POST OTLP traces to /v1/traces\n", "text/plain")
            return
        media = JSON if "json" in (self.headers.get("Content-Type") or "") else None
        try:
            self._export()
        except BadRequest as exc:
            self.ingest.reject("http", exc.reason)
            self._error(exc.status, exc.message, media)
        except Refused as exc:
            self.ingest.reject("http", exc.reason)
            status = 429 if exc.reason == semconv.REJECT_FULL else 503
            headers = {}
            if exc.retry_after is not None:
                headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
            self._error(status, exc.message, media, headers)
        except OSError:
            raise  # the connection failed: `_Server.handle_error` logs it
        except Exception as exc:  # a bug: answered and counted, never a dropped connection
            logger.exception("request failed", extra={"event": "request_failed"})
            self.ingest.reject("http", semconv.REJECT_INTERNAL)
            self.close_connection = True
            self._error(500, f"internal error: {type(exc).__name__}", media)

    def _export(self) -> None:
        ingest = self.ingest
        limit = ingest.config.limits.max_body_bytes
        if not ingest.authorized(self.headers.get("Authorization")):
            self._discard_body()
            raise BadRequest(401, semconv.REJECT_UNAUTHENTICATED, "missing or wrong bearer token")
        size = limit if self._chunked() else min(self._length(), limit)
        if not self.budget.take(size):
            self.close_connection = True  # the body is not read: the connection is done
            raise self._busy()
        held = size
        try:
            body = self._body(limit)
            media = media_type(self.headers.get("Content-Type"))
            data = decompress(body, self.headers.get("Content-Encoding"), limit)
            del body
            if media == JSON:
                held += self._take_parse_cost(data, held)
            request = decode(data, media, ingest.config.limits)
            ingest.accept(request, "http", data if media == PROTOBUF else None)
        finally:
            self.budget.give(held)
        if media == JSON:
            self._reply(200, b"{}", JSON)
        else:
            self._reply(200, ExportTraceServiceResponse().SerializeToString(), media)

    def _take_parse_cost(self, data: bytes, held: int) -> int:
        """What parsing OTLP/JSON may cost, taken from the bytes in flight before it runs.

        Python's objects cost up to 35 times a JSON body of empty objects: a body whose
        parse could not fit `max_bytes_in_flight` beside its own bytes is a 413, one that
        does not fit now a 429, so concurrent JSON bodies stay within the budget too.
        """
        cost = json_cost(data)
        if held + cost > self.budget.limit:
            message = (
                f"OTLP/JSON body too large to parse: up to {cost} bytes of objects, over "
                f"max_bytes_in_flight ({self.budget.limit}); send fewer spans per request"
            )
            raise BadRequest(413, semconv.REJECT_TOO_LARGE, message)
        if not self.budget.take(cost):
            raise self._busy()
        return cost

    def _busy(self) -> Refused:
        retry_after = self.ingest.config.forwarding.retry_after_seconds
        return Refused(semconv.REJECT_FULL, "receiver busy: too many bytes in flight", retry_after)

    def _body(self, limit: int) -> bytes:
        """The body as sent, sized by Content-Length or chunked; 413 past `limit`."""
        if self._chunked():
            try:
                return read_chunked(self.rfile, limit)
            except BadRequest:
                self.close_connection = True  # the rest of the body is not read
                raise
        length = self._length()
        if length > limit:
            self.close_connection = True  # the body is not read: the connection is done
            raise BadRequest(413, semconv.REJECT_TOO_LARGE, f"body over {limit} bytes")
        return self.rfile.read(length)

    def _chunked(self) -> bool:
        """Whether the body is chunked; any other transfer coding is refused."""
        coding = self.headers.get("Transfer-Encoding")
        if coding is None:
            return False
        if coding.strip().lower() != "chunked" or "Content-Length" in self.headers:
            self.close_connection = True
            message = f"unsupported Transfer-Encoding {coding!r} (only chunked, alone)"
            raise BadRequest(400, semconv.REJECT_MALFORMED, message)
        return True

    def _length(self) -> int:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.close_connection = True
            raise BadRequest(411, semconv.REJECT_MALFORMED, "Content-Length required") from None
        if length < 0:
            self.close_connection = True
            raise BadRequest(400, semconv.REJECT_MALFORMED, "negative Content-Length")
        return length

    def _discard_body(self) -> None:
        if "Transfer-Encoding" in self.headers:
            self.close_connection = True  # a chunked body is not worth reading to skip
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if 0 <= length <= self.ingest.config.limits.max_body_bytes:
            self.rfile.read(length)
        else:
            self.close_connection = True

    def _error(
        self,
        status: int,
        message: str,
        media: str | None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """An OTLP error reply: a google.rpc.Status in the request's encoding."""
        if media == JSON:
            body = json.dumps({"message": message}).encode()
            self._reply(status, body, JSON, headers)
        else:
            body = status_pb2.Status(message=message).SerializeToString()
            self._reply(status, body, "application/x-protobuf", headers)

    def _reply(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        cast(_Server, self.server).replied(self.connection)


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
