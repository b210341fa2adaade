"""The OTLP/HTTP receiver: every connection served by one asyncio event loop, on one thread.

A thread per connection and the standard library's `http.server` cost more CPU than
the rest of the collector's pass-through; a loop reading sockets and a parser for the
HTTP/1.1 that OTLP exporters, probes and Prometheus speak cost a fraction of it. Spoken
here: GET and POST, bodies sized by Content-Length or chunked (see `chunked`),
keep-alive, `Expect: 100-continue`. What is refused, and with which status, is
`receivers`' table.

The door bounds memory and time: connections (`max_connections`: one more is answered
503 + Retry-After and closed), the bytes of bodies being read and decoded at once
(`max_bytes_in_flight`, 429 + Retry-After past it), and the time a request may take to
arrive (`request_timeout_seconds`, from the connection's opening or its last reply
until the request is whole, not each read: a client sending a byte a minute is closed,
as is a connection idle that long).

A request is decoded and queued on the loop when the queue is in memory (a put is an
append under a lock); a durable queue's put (SQLite, Redis) runs on a small thread
pool, so a slow store does not stall the other connections. Either way the 200 is
written only once the put returned.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from http import HTTPStatus
from typing import ParamSpec, TypeVar

from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracefact import semconv
from tracefact.collector.chunked import read_chunked
from tracefact.collector.decode import (
    JSON,
    PROTOBUF,
    BadRequest,
    decode,
    decompress,
    json_cost,
    media_type,
)
from tracefact.collector.receivers import TRACES_PATH, Ingest, Refused, port_taken
from tracefact.prometheus import CONTENT_TYPE as METRICS_CONTENT_TYPE

logger = logging.getLogger("tracefact.collector")

BACKLOG = 1024
"""Connections the kernel holds before one is accepted: a small backlog leaves hundreds of
clients connecting at once waiting for SYN retries (seconds each)."""
HEAD_LIMIT = 64 * 1024
"""Bytes a request's head (request line and headers) may take; more is a 431."""
MAX_HEADERS = 100
"""Header lines a request may have; more is a 431."""
QUEUE_THREADS = 8
"""Threads putting requests on a durable queue at once."""
SERVER = "tracefact-collector"
_REASONS = {status.value: status.phrase for status in HTTPStatus}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_OK_PROTOBUF = ExportTraceServiceResponse().SerializeToString()

_P = ParamSpec("_P")
_T = TypeVar("_T")


class HttpReceiver:
    """OTLP/HTTP plus health and metrics, on an event loop of its own thread."""

    def __init__(self, ingest: Ingest, render_metrics: Callable[[], bytes]) -> None:
        receiver = ingest.config.receivers.http
        assert receiver is not None, "built only when the HTTP receiver is on"
        host, port = receiver.host, receiver.port
        try:
            self._socket = socket.create_server((host, port), backlog=BACKLOG)
        except OSError as exc:
            raise port_taken("receivers.http", host, port, exc.strerror) from None
        self.port: int = self._socket.getsockname()[1]
        self._executor = (
            ThreadPoolExecutor(QUEUE_THREADS, thread_name_prefix="tracefact-http-queue")
            if ingest.queue.durable
            else None
        )
        self._loop = asyncio.new_event_loop()
        self._door = _Door(ingest, render_metrics, self._loop, self._executor)
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tracefact-http", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result()

    def stop(self) -> None:
        """Stop listening and close every connection (requests being queued are done)."""
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        else:
            self._socket.close()
        self._loop.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False)  # a put under way ends on its own

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._door.serve, sock=self._socket, backlog=BACKLOG, limit=HEAD_LIMIT
        )

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._door.close()
        if self._server is not None:
            await self._server.wait_closed()


class _Budget:
    """Bytes of request bodies being read and decoded at once; never waits.

    Used from the loop's thread only: no lock.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0

    def take(self, size: int) -> bool:
        if self._used + size > self.limit:
            return False
        self._used += size
        return True

    def give(self, size: int) -> None:
        self._used -= size


class _Door:
    """What the connections share: the limits, the budget, the count of open ones."""

    def __init__(
        self,
        ingest: Ingest,
        render: Callable[[], bytes],
        loop: asyncio.AbstractEventLoop,
        executor: ThreadPoolExecutor | None,
    ) -> None:
        limits = ingest.config.limits
        self.ingest = ingest
        self.render = render
        self.budget = _Budget(limits.max_bytes_in_flight)
        self.timeout = limits.request_timeout_seconds
        self.max_connections = limits.max_connections
        self._loop = loop
        self._executor = executor
        self._connections: set[asyncio.Task[None]] = set()
        self._date = (0, "")  # the Date header's value, formatted once a second
        retry_after = max(1, math.ceil(ingest.config.forwarding.retry_after_seconds))
        body = b"too many connections\n"
        self._too_many = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: {retry_after}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + body

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: its requests in turn, until it closes, fails or is too slow."""
        if len(self._connections) >= self.max_connections:
            self.ingest.reject("http", semconv.REJECT_CONNECTIONS)
            writer.write(self._too_many)
            writer.close()  # once the reply is out
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await _Connection(self, reader, writer).serve()
        except (ConnectionError, asyncio.IncompleteReadError):
            logger.debug("client went away", extra={"event": "client_gone"})
        except Exception:
            logger.error("connection failed", exc_info=True, extra={"event": "connection_failed"})
        finally:
            self._connections.discard(task)
            writer.close()

    async def run(self, call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """`call` on the loop, or on the queue's threads where it may wait on a store."""
        if self._executor is None:
            return call(*args, **kwargs)
        return await self._loop.run_in_executor(self._executor, lambda: call(*args, **kwargs))

    def date(self) -> str:
        now = int(time.time())
        if now != self._date[0]:
            self._date = (now, formatdate(now, usegmt=True))
        return self._date[1]

    async def close(self) -> None:
        """Close every connection, waiting for none."""
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)


class _Head(Exception):
    """A request head the receiver cannot read: answered, then the connection closed."""

    def __init__(self, status: int, message: str, reason: str = semconv.REJECT_MALFORMED) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        """Its reason in `tracefact.collector.requests.rejected`."""


class _Connection:
    """One connection's requests, one at a time (HTTP/1.1 keep-alive, no pipelining)."""

    def __init__(
        self, door: _Door, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.door = door
        self.reader = reader
        self.writer = writer
        self.method = ""
        self.path = ""
        self.headers: dict[str, str] = {}
        self.close = False  # after this reply
        self._deadline: asyncio.TimerHandle | None = None  # closes a request too slow

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self.close:
                timeout = self.door.timeout
                self.method = ""  # no request head read yet
                self._deadline = loop.call_at(loop.time() + timeout, self._too_slow, False)
                try:
                    if not await self._read_head():
                        return  # closed between requests
                except _Head as exc:
                    self.door.ingest.reject("http", exc.reason)
                    self.close = True
                    self._reply(exc.status, f"{exc.message}\n".encode(), "text/plain")
                else:
                    await self._respond()
                self._whole()
                # The reply must leave in time too: a client that does not read it holds
                # its connection no longer than one too slow to send.
                self._deadline = loop.call_at(loop.time() + timeout, self._too_slow, True)
                await self.writer.drain()
                self._whole()
        finally:
            self._whole()

    async def _respond(self) -> None:
        if self.method == "GET":
            self._whole()
            await self.do_get()
        elif self.method == "POST":
            await self.do_post()
        else:
            self.door.ingest.reject("http", semconv.REJECT_METHOD)
            self.close = True
            self._reply(501, f"unsupported method {self.method}\n".encode(), "text/plain")

    def _whole(self) -> None:
        """The request arrived whole (or is answered without the rest): no deadline now."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self, replying: bool) -> None:
        """`request_timeout_seconds` passed: the connection is closed.

        Waiting for a request's head (an idle keep-alive connection, or a head never
        finished) it is only closed. A request whose body did not arrive whole gets a 408
        first, and a reply the client did not read is cut; both are counted (`timeout`).
        """
        logger.debug("request past its deadline", extra={"event": "client_too_slow"})
        if not (replying or self.method):
            self.writer.transport.abort()
            return
        self.door.ingest.reject("http", semconv.REJECT_TIMEOUT)
        if replying:
            self.writer.transport.abort()
            return
        self.close = True
        self._reply(408, b"request not whole before timeout\n", "text/plain")
        self.writer.transport.close()  # the 408 is sent before the connection closes

    async def _read_head(self) -> bool:
        """The next request's line and headers; False if the client closed instead."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise
            return False
        except asyncio.LimitOverrunError:
            too_long = f"request head over {HEAD_LIMIT} bytes"
            raise _Head(431, too_long, semconv.REJECT_TOO_LARGE) from None
        lines = head[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _Head(400, f"bad request line {lines[0][:100]!r}")
        if len(lines) > MAX_HEADERS + 1:
            raise _Head(431, f"more than {MAX_HEADERS} headers", semconv.REJECT_TOO_LARGE)
        self.method, target, version = parts
        self.path = target.split("?", 1)[0]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise _Head(400, f"bad header line {line[:100]!r}")
            key, value = name.lower(), value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        self.headers = headers
        connection = headers.get("connection", "").lower()
        self.close = "close" in connection or (
            version == "HTTP/1.0" and "keep-alive" not in connection
        )
        return True

    async def do_get(self) -> None:
        if self.path == "/healthz":
            self._reply(200, b'{"status": "ok"}\n', "application/json")
        elif self.path == "/readyz":
            reason = await self.door.run(self.door.ingest.unready)
            state = (
                {"status": "ready"} if reason is None else {"status": "not ready", "reason": reason}
            )
            body = json.dumps(state).encode() + b"\n"
            self._reply(200 if reason is None else 503, body, "application/json")
        elif self.path == "/metrics":
            self._reply(200, self.door.render(), METRICS_CONTENT_TYPE)
        else:
            self._reply(404, b"not found\n", "text/plain")

    async def do_post(self) -> None:
        ingest = self.door.ingest
        if self.path != TRACES_PATH:
            ingest.reject("http", semconv.REJECT_PATH)  # an exporter pointed at the wrong path
            await self._discard_body()
            self._reply(404, b"not found: POST OTLP traces to /v1/traces\n", "text/plain")
            return
        media = JSON if "json" in self.headers.get("content-type", "") else None
        try:
            await self._export()
        except BadRequest as exc:
            ingest.reject("http", exc.reason)
            self._error(exc.status, exc.message, media)
        except Refused as exc:
            ingest.reject("http", exc.reason)
            status = 429 if exc.reason == semconv.REJECT_FULL else 503
            headers = {}
            if exc.retry_after is not None:
                headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
            self._error(status, exc.message, media, headers)
        except (OSError, asyncio.IncompleteReadError):
            raise  # the connection failed or was too slow: `_Door.serve` logs it
        except Exception as exc:  # a bug: answered and counted, never a dropped connection
            logger.exception("request failed", extra={"event": "request_failed"})
            ingest.reject("http", semconv.REJECT_INTERNAL)
            self.close = True
            self._error(500, f"internal error: {type(exc).__name__}", media)

    async def _export(self) -> None:
        ingest = self.door.ingest
        budget = self.door.budget
        limit = ingest.config.limits.max_body_bytes
        if not ingest.authorized(self.headers.get("authorization")):
            await self._discard_body()
            raise BadRequest(401, semconv.REJECT_UNAUTHENTICATED, "missing or wrong bearer token")
        size = limit if self._chunked() else min(self._length(), limit)
        if not budget.take(size):
            self.close = True  # the body is not read: the connection is done
            raise self._busy()
        held = size
        try:
            body = await self._body(limit)
            self._whole()
            media = media_type(self.headers.get("content-type"))
            data = decompress(body, self.headers.get("content-encoding"), limit)
            del body
            if media == JSON:
                held += self._take_parse_cost(data, held)
            await self.door.run(self._queue, data, media)
        finally:
            budget.give(held)
        if media == JSON:
            self._reply(200, b"{}", JSON)
        else:
            self._reply(200, _OK_PROTOBUF, media)

    def _queue(self, data: bytes, media: str) -> None:
        """Decode and queue the request, or raise (`BadRequest`, `Refused`)."""
        ingest = self.door.ingest
        request = decode(data, media, ingest.config.limits)
        ingest.accept(request, "http", data if media == PROTOBUF else None)

    def _take_parse_cost(self, data: bytes, held: int) -> int:
        """What parsing OTLP/JSON may cost, taken from the bytes in flight before it runs.

        Python's objects cost up to 35 times a JSON body of empty objects: a body whose
        parse could not fit `max_bytes_in_flight` beside its own bytes is a 413, one that
        does not fit now a 429, so concurrent JSON bodies stay within the budget too.
        """
        budget = self.door.budget
        cost = json_cost(data)
        if held + cost > budget.limit:
            message = (
                f"OTLP/JSON body too large to parse: up to {cost} bytes of objects, over "
                f"max_bytes_in_flight ({budget.limit}); send fewer spans per request"
            )
            raise BadRequest(413, semconv.REJECT_TOO_LARGE, message)
        if not budget.take(cost):
            raise self._busy()
        return cost

    def _busy(self) -> Refused:
        retry_after = self.door.ingest.config.forwarding.retry_after_seconds
        return Refused(semconv.REJECT_FULL, "receiver busy: too many bytes in flight", retry_after)

    async def _body(self, limit: int) -> bytes:
        """The body as sent, sized by Content-Length or chunked; 413 past `limit`."""
        if self._chunked():
            self._continue()
            try:
                return await read_chunked(self.reader, limit)
            except BadRequest:
                self.close = True  # the rest of the body is not read
                raise
        length = self._length()
        if length > limit:
            self.close = True  # the body is not read: the connection is done
            raise BadRequest(413, semconv.REJECT_TOO_LARGE, f"body over {limit} bytes")
        self._continue()
        return await self.reader.readexactly(length)

    def _continue(self) -> None:
        """A client that waits for leave to send its body (`Expect: 100-continue`) gets it."""
        if self.headers.get("expect", "").lower() == "100-continue":
            self.writer.write(_CONTINUE)

    def _chunked(self) -> bool:
        """Whether the body is chunked; any other transfer coding is refused."""
        coding = self.headers.get("transfer-encoding")
        if coding is None:
            return False
        if coding.strip().lower() != "chunked" or "content-length" in self.headers:
            self.close = True
            message = f"unsupported Transfer-Encoding {coding!r} (only chunked, alone)"
            raise BadRequest(400, semconv.REJECT_MALFORMED, message)
        return True

    def _length(self) -> int:
        try:
            length = int(self.headers.get("content-length", ""))
        except ValueError:
            self.close = True
            raise BadRequest(411, semconv.REJECT_MALFORMED, "Content-Length required") from None
        if length < 0:
            self.close = True
            raise BadRequest(400, semconv.REJECT_MALFORMED, "negative Content-Length")
        return length

    async def _discard_body(self) -> None:
        if "transfer-encoding" in self.headers:
            self.close = True  # a chunked body is not worth reading to skip
            return
        try:
            length = int(self.headers.get("content-length", "0"))
        except ValueError:
            length = -1
        if 0 <= length <= self.door.ingest.config.limits.max_body_bytes:
            self._continue()
            await self.reader.readexactly(length)
            self._whole()
        else:
            self.close = True

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
            self._reply(status, body, PROTOBUF, headers)

    def _reply(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, '')}",
            f"Server: {SERVER}",
            f"Date: {self.door.date()}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        lines.extend(f"{name}: {value}" for name, value in (headers or {}).items())
        if self.close:
            lines.append("Connection: close")
        lines.append("\r\n")
        self.writer.write("\r\n".join(lines).encode("latin-1") + body)
