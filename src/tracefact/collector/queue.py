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

from dataclasses import dataclass
from typing import Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class QueueFull(Exception):
    """The queue is at its bound: the receiver answers 429 / RESOURCE_EXHAUSTED."""

    def __init__(self, retry_after_seconds: float) -> None:
        super().__init__(f"queue full; retry in {retry_after_seconds:g} s")
        self.retry_after_seconds = retry_after_seconds


@dataclass(frozen=True, slots=True)
class Entry:
    """One received request, as handed to processing."""

    id: str
    request: ExportTraceServiceRequest
    deliveries: int = 1
    """1 the first time; more when a consumer died before acknowledging it."""


class RequestQueue(Protocol):
    """Where received requests wait for processing."""

    durable: bool
    """True when an acknowledged-to-the-client request survives a crash."""

    def put(self, request: ExportTraceServiceRequest) -> None:
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

    def close(self) -> None:
        """Release connections and files; entries not acknowledged stay (durable backends)."""
        ...
