"""The collector's queue backends: spans per second through each, and workers scaling out.

1. Spans/s through `put` → `get` → `ack` of each backend (memory, sqlite with
   `synchronous` full and normal, redis with AOF `appendfsync always` and `everysec`):
   one thread puts pre-built OTLP requests of 512 spans, another takes and acknowledges
   them. Every request is stored before `put` returns, as the receivers need.
2. Evaluation throughput of `tracefact worker` processes (1, 2 and 4) on one Redis stream
   with an evaluator that only waits: see `--workers`.

Redis parts need Debian's redis-server (`make redis-server`); without it they are skipped
with a note.

    python benchmarks/collector_queues.py [--requests 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.collector.queues.redis_server import RedisServer
from tracefact.collector.queue import QueueFull, RequestQueue
from tracefact.collector.redis_queue import RedisQueue
from tracefact.collector.sqlite_queue import SqliteQueue

SPANS_PER_REQUEST = 512


def otlp_request(spans: int = SPANS_PER_REQUEST) -> ExportTraceServiceRequest:
    """A request like an SDK's batch: spans of a few traces with a dozen attributes each."""
    attributes = [
        KeyValue(key=f"app.attribute.{i}", value=AnyValue(string_value="value " * 4))
        for i in range(12)
    ]
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                scope_spans=[
                    ScopeSpans(
                        spans=[
                            Span(
                                name=f"operation {i % 7}",
                                trace_id=os.urandom(16),
                                span_id=os.urandom(8),
                                start_time_unix_nano=1,
                                end_time_unix_nano=2,
                                attributes=attributes,
                            )
                            for i in range(spans)
                        ]
                    )
                ]
            )
        ]
    )


def spans_per_second(queue: RequestQueue, requests: int) -> float:
    """Puts `requests` requests from one thread while another takes and acknowledges them."""
    request = otlp_request()
    acked = 0

    def consume() -> None:
        nonlocal acked
        while acked < requests:
            for entry in queue.get(64, 0.5):
                queue.ack(entry.id)
                acked += 1

    consumer = threading.Thread(target=consume)
    start = time.perf_counter()
    consumer.start()
    for _ in range(requests):
        while True:
            try:
                queue.put(request)
                break
            except QueueFull as full:
                time.sleep(min(full.retry_after_seconds, 0.01))
    consumer.join()
    elapsed = time.perf_counter() - start
    return requests * SPANS_PER_REQUEST / elapsed


def backends(directory: Path) -> dict[str, Callable[[], RequestQueue]]:
    """Each backend's opener; Redis ones start their own server (the caller stops them)."""
    openers: dict[str, Callable[[], RequestQueue]] = {
        "sqlite (synchronous=full)": lambda: SqliteQueue(directory / "full.db"),
        "sqlite (synchronous=normal)": lambda: SqliteQueue(
            directory / "normal.db", synchronous="normal"
        ),
    }
    binary = shutil.which("redis-server")
    if binary is None:
        print("redis: skipped (redis-server is not installed; `make redis-server`)")
        return openers
    for fsync in ("always", "everysec"):
        server = RedisServer(binary, _mkdir(directory / f"redis-{fsync}"), appendfsync=fsync)
        SERVERS.append(server)
        openers[f"redis (appendfsync {fsync})"] = lambda s=server: _started(s)
    return openers


SERVERS: list[RedisServer] = []


def _started(server: RedisServer) -> RequestQueue:
    server.start()
    return RedisQueue(server.url)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests of 512 spans")
    args = parser.parse_args()
    print(f"== queue backends: {args.requests} requests of {SPANS_PER_REQUEST} spans")
    with tempfile.TemporaryDirectory() as directory:
        try:
            for name, open_queue in backends(Path(directory)).items():
                queue = open_queue()
                rate = spans_per_second(queue, args.requests)
                queue.close()
                print(f"{name:32s} {rate:12,.0f} spans/s")
        finally:
            for server in SERVERS:
                server.stop()


if __name__ == "__main__":
    main()
