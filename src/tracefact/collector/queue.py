"""The collector's queue of received requests: the seam between ingest and processing.

A receiver answers 200 only once `put` returned, so what a queue holds is what the
collector promised to forward. Processing takes entries with `get` and acknowledges each
with `ack` once all of its spans left upstream (evaluated or not). One interface, three
backends (memory, SQLite, Redis Streams): the processing code does not know which.

- `memory` (the default) is bounded and lost with the process; `get` never redelivers.
- Durable backends return from `put` only once the request is stored, and hand an entry
  that was not acknowledged (its consumer died) to `get` again, with `deliveries` > 1:
  delivery is at least once, and redelivered entries are counted as possible duplicates.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefact.collector.decode import BadRequest, outline
from tracefact.errors import ConfigurationError, TracefactError

logger = logging.getLogger(__name__)


def require_positive(**values: float) -> None:
    """A backend's bounds checked where it is built: a ValueError naming the first not > 0."""
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, not {value!r}")


class QueueFull(TracefactError):
    """The queue is at its bound: the receiver answers 429 / RESOURCE_EXHAUSTED."""

    transient = True

    def __init__(self, retry_after_seconds: float) -> None:
        super().__init__(f"queue full; retry in {retry_after_seconds:g} s")
        self.retry_after_seconds = retry_after_seconds


class QueueUnavailable(QueueFull):
    """The queue's store cannot take the request now (Redis unreachable, disk full).

    A `QueueFull` so that a receiver which knows only that answers with a retry hint
    too: the client keeps the data and sends it again, nothing is acknowledged unstored.
    """

    def __init__(self, reason: str, retry_after_seconds: float) -> None:
        QueueFull.__init__(self, retry_after_seconds)
        self.args = (f"queue unavailable ({reason}); retry in {retry_after_seconds:g} s",)
        self.reason = reason


class QueueBroken(ConfigurationError):
    """The store is not a queue (a damaged or foreign file): a fault that cannot clear.

    Raised where the queue is opened (one line for the operator, no traceback) and by
    `get` once the store turns out damaged: the collector reports it on `/readyz`, then
    exits non-zero, since no retry can make the file a queue again.
    """

    transient = False


class Outage:
    """A queue operation that fails now and is tried again later, with backoff.

    `put` refuses (503) while the store cannot take data; `get` and `ack` wait their
    turn here instead of hammering a store that is locked, full or refusing writes,
    and `unavailable` reports the last failure until an operation succeeds again. The
    first failure and the recovery are logged once each, not every retry.
    """

    def __init__(self, name: str, base_seconds: float = 0.05, max_seconds: float = 2.0) -> None:
        self.name = name
        self._base = base_seconds
        self._max = max_seconds
        self._failures = 0
        self._retry_at = 0.0
        self.reason: str | None = None

    def failed(self, operation: str, exc: BaseException) -> None:
        self.reason = f"{operation}: {type(exc).__name__}: {exc}"
        if self._failures == 0:
            logger.warning(
                "queue operation failed; retrying with backoff",
                extra={"event": "queue_fault", "queue": self.name, "error": self.reason},
            )
        self._failures += 1
        delay = min(self._max, self._base * 2 ** min(self._failures - 1, 16))
        self._retry_at = time.monotonic() + delay

    def succeeded(self) -> None:
        if self._failures:
            logger.warning(
                "queue operations succeed again",
                extra={"event": "queue_recovered", "queue": self.name},
            )
        self._failures = 0
        self._retry_at = 0.0
        self.reason = None

    def wait_seconds(self) -> float:
        """How long until the next try is due (0 when it is)."""
        return max(0.0, self._retry_at - time.monotonic())


class Encoded:
    """A request as OTLP protobuf bytes, with its span count: what a queue stores.

    The bytes are those received whenever nothing changed them (no attribute limit
    applied): the collector forwards what it received without encoding it again. The
    decoded request rides along when the receiver has it, for the engine to read.
    """

    __slots__ = ("body", "request", "spans")

    def __init__(
        self, body: bytes, spans: int, request: ExportTraceServiceRequest | None = None
    ) -> None:
        self.body = body
        self.spans = spans
        self.request = request

    @classmethod
    def of(cls, request: ExportTraceServiceRequest | Encoded) -> Encoded:
        """A request encoded (once), or an `Encoded` as it is."""
        if isinstance(request, Encoded):
            return request
        spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        return cls(request.SerializeToString(), spans, request)


class Entry:
    """One received request, as handed to processing: its bytes, decoded when first read.

    Bytes a durable store damaged (only a damaged store, or a foreign writer, fails to
    decode) give an empty request with no spans and no bytes, logged: processing
    acknowledges it and goes on.
    """

    __slots__ = ("_request", "_spans", "body", "deliveries", "id", "stored_at")

    def __init__(
        self,
        id: str,
        encoded: Encoded,
        deliveries: int = 1,
        stored_at: float | None = None,
    ) -> None:
        self.id = id
        self.body = encoded.body
        self._spans: int | None = encoded.spans
        self._request = encoded.request
        self.deliveries = deliveries
        """1 the first time; more when a consumer died before acknowledging it."""
        self.stored_at = time.time() if stored_at is None else stored_at
        """When `put` stored it (Unix seconds): a durable queue's entries can be old."""

    @classmethod
    def stored(cls, id: str, payload: bytes, deliveries: int, stored_at: float) -> Entry:
        """An entry from what a durable queue stored: decoded when first read."""
        entry = cls(id, Encoded(payload, 0), deliveries, stored_at)
        entry._spans = None
        return entry

    @property
    def request(self) -> ExportTraceServiceRequest:
        if self._request is None:
            self._request = ExportTraceServiceRequest()
            try:
                self._request.ParseFromString(self.body)
            except DecodeError:
                self._damaged()
        return self._request

    @property
    def spans(self) -> int:
        if self._spans is None:
            try:
                self._spans = outline(self.body).spans
            except BadRequest:
                self._damaged()
                self._spans = 0
        return self._spans

    def _damaged(self) -> None:
        logger.error("queue entry %s is not an OTLP request: handed on empty", self.id)
        self._request, self._spans, self.body = ExportTraceServiceRequest(), 0, b""


class RequestQueue(Protocol):
    """Where received requests wait for processing."""

    durable: bool
    """True when an acknowledged-to-the-client request survives a crash."""

    def put(self, request: ExportTraceServiceRequest | Encoded) -> None:
        """Store one request; raises `QueueFull` at the bound. Durable once it returns."""
        ...

    def get(self, max_entries: int, timeout_seconds: float) -> list[Entry]:
        """Up to `max_entries` entries, waiting at most `timeout_seconds` for the first."""
        ...

    def ack(self, entry_id: str) -> None:
        """The entry's spans all left upstream: forget it."""
        ...

    def depth(self) -> int:
        """Entries stored and not yet acknowledged."""
        ...

    def unavailable(self) -> str | None:
        """Why the store cannot take requests now (`put` would raise `QueueUnavailable`).

        None while it can. `/readyz` asks, so that a load balancer sends elsewhere.
        """
        ...

    def close(self) -> None:
        """Release connections and files; entries not acknowledged stay (durable backends).

        Durable backends hand the entries this process took and did not acknowledge back
        at once, so the next consumer need not wait for their leases to run out.
        """
        ...
