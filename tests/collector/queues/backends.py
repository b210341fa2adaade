"""Every queue backend behind one opener, for tests that run the same cases on each."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tracefact.collector.memory import MemoryQueue
from tracefact.collector.queue import RequestQueue
from tracefact.collector.redis_queue import RedisQueue
from tracefact.collector.sqlite_queue import SqliteQueue

Opener = Callable[..., RequestQueue]
"""Opens a queue on the test's one store: `opener(max_entries=..., lease_seconds=...)`."""


def request(number: int, spans: int = 1) -> ExportTraceServiceRequest:
    """A request whose spans are named after `number`, each in its own trace."""
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                scope_spans=[
                    ScopeSpans(
                        spans=[
                            Span(
                                name=f"span-{number}-{i}",
                                trace_id=os.urandom(16),
                                span_id=os.urandom(8),
                            )
                            for i in range(spans)
                        ]
                    )
                ]
            )
        ]
    )


def names(request: ExportTraceServiceRequest) -> list[str]:
    return [
        span.name
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


def memory_opener() -> Opener:
    """The one in-process queue: the first call creates it, later ones return it."""
    queues: list[MemoryQueue] = []

    def open_queue(max_entries: int = 1000, lease_seconds: float = 30.0) -> RequestQueue:
        if not queues:
            queues.append(MemoryQueue(max_entries))
        return queues[0]

    return open_queue


def sqlite_opener(path: Path) -> Opener:
    def open_queue(max_entries: int = 1000, lease_seconds: float = 30.0) -> RequestQueue:
        return SqliteQueue(path, max_entries=max_entries, lease_seconds=lease_seconds)

    return open_queue


def redis_opener(url: str) -> Opener:
    def open_queue(max_entries: int = 1000, lease_seconds: float = 30.0) -> RequestQueue:
        return RedisQueue(url, max_entries=max_entries, lease_seconds=lease_seconds)

    return open_queue
