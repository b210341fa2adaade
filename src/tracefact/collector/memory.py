"""`MemoryQueue`: the default `RequestQueue`, bounded and lost with the process."""

from __future__ import annotations

import itertools
import threading
from collections import deque

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefact.collector.queue import Encoded, Entry, QueueFull


class MemoryQueue:
    """Requests in a deque; the bound counts entries not yet acknowledged.

    Counting unacknowledged entries (not only waiting ones) bounds everything the
    collector holds for a request until its spans left upstream.
    """

    durable = False

    def __init__(self, max_entries: int, retry_after_seconds: float = 1.0) -> None:
        self.max_entries = max_entries
        self.retry_after_seconds = retry_after_seconds
        self._waiting: deque[Entry] = deque()
        self._unacked: set[str] = set()
        self._ids = itertools.count(1)
        self._ready = threading.Condition()  # guards _waiting, _unacked and _consumers
        self._consumers = 0  # in get(), waiting for an entry

    def put(self, request: ExportTraceServiceRequest | Encoded) -> None:
        with self._ready:
            if len(self._unacked) >= self.max_entries:
                raise QueueFull(self.retry_after_seconds)
            entry = Entry(str(next(self._ids)), Encoded.of(request))
            self._unacked.add(entry.id)
            self._waiting.append(entry)
            if self._consumers:  # notify() costs a lock round even with no one waiting
                self._ready.notify()

    def get(self, max_entries: int, timeout_seconds: float) -> list[Entry]:
        with self._ready:
            if not self._waiting:
                self._consumers += 1
                try:
                    self._ready.wait(timeout_seconds)
                finally:
                    self._consumers -= 1
            count = min(max_entries, len(self._waiting))
            return [self._waiting.popleft() for _ in range(count)]

    def ack(self, entry_id: str) -> None:
        with self._ready:
            self._unacked.discard(entry_id)

    def depth(self) -> int:
        with self._ready:
            return len(self._unacked)

    def unavailable(self) -> str | None:
        """Never: memory is always there (when full, `put` says so)."""
        return None

    def close(self) -> None:
        """Nothing to release: what is held is lost with the process."""
