"""The collector's queue backends: spans per second through each, and workers scaling out.

1. Spans/s through `put` → `get` → `ack` of each backend (memory, sqlite with
   `synchronous` full and normal, redis with AOF `appendfsync always` and `everysec`):
   one thread puts pre-built OTLP requests of 512 spans, another takes and acknowledges
   them. Every request is stored before `put` returns, as the receivers need.
2. Evaluation throughput of `tracefact worker` processes (1, 2 and 4, the command users
   run) on one Redis stream, with an evaluator that only waits (`--latency`, 16 at once
   per worker): what the queue lets workers add, not what this machine's two cores do.
   The requests (an LLM span, a child and the retriever span grounding it) are stored
   once every worker is up; the clock stops when the last evaluated span arrived
   upstream. The window is 0 here: it delays spans, it costs no throughput.

Redis parts need Debian's redis-server (`make redis-server`); without it they are skipped
with a note.

    python benchmarks/collector_queues.py [--requests 200] [--traces 600] [--latency 0.5]
"""

from __future__ import annotations

import argparse
import functools
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

from tests.collector.harness import CollectorProcess
from tests.collector.queues import processes
from tests.collector.queues.redis_server import RedisServer
from tests.fakes.otlp import OTLPReceiver, otlp_receiver
from tracefact import semconv
from tracefact.collector.memory import MemoryQueue
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
        "memory": lambda: MemoryQueue(10_000),
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
        openers[f"redis (appendfsync {fsync})"] = functools.partial(_started, server)
    return openers


SERVERS: list[RedisServer] = []


def _started(server: RedisServer) -> RequestQueue:
    server.start()
    return RedisQueue(server.url)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def evaluations_per_second(
    directory: Path, binary: str, workers: int, traces: int, latency: float
) -> float:
    """`workers` worker processes on one stream; evaluated LLM spans per second."""
    server = RedisServer(binary, _mkdir(directory / f"redis-workers-{workers}"), "everysec")
    server.start()
    started: list[CollectorProcess] = []
    try:
        with otlp_receiver() as upstream:
            settings = processes.config(
                upstream.endpoint,
                latency,
                queue_size=32,
                queue="redis",
                redis={"url": server.url},
                queue_max_requests=100_000,
            )
            settings["evaluation"] |= {"concurrency": 16, "window_seconds": 0}
            for number in range(workers):
                path = directory / f"worker-{workers}-{number}.yaml"
                started.append(processes.start("worker", path, settings))
            queue = RedisQueue(server.url)
            requests = [r for t in range(1, traces + 1) for r in processes.trace_requests(t, True)]
            start = time.perf_counter()
            for request in requests:
                queue.put(request)
            queue.close()
            upstream.wait_for(processes.SPANS_PER_TRACE * traces, timeout=600)
            elapsed = time.perf_counter() - start
            if _evaluated(upstream) < traces:
                raise RuntimeError("not every LLM span arrived evaluated")
            return traces / elapsed
    finally:
        processes.stop(started)
        server.stop()


def _evaluated(upstream: OTLPReceiver) -> int:
    return sum(
        1
        for statuses in processes.llm_statuses(upstream).values()
        for status in statuses
        if status.startswith(semconv.STATUS_OK)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests of 512 spans")
    parser.add_argument("--traces", type=int, default=600, help="LLM spans for the workers")
    parser.add_argument("--latency", type=float, default=0.5, help="the evaluator's wait (s)")
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
        binary = shutil.which("redis-server")
        if binary is None:
            return
        print(
            f"== tracefact worker processes on one Redis stream: {args.traces} LLM spans, "
            f"an evaluator that waits {args.latency:g} s, 16 at once per worker"
        )
        for workers in (1, 2, 4):
            rate = evaluations_per_second(
                Path(directory), binary, workers, args.traces, args.latency
            )
            print(f"{workers} worker(s)  {rate:8,.1f} evaluations/s")


if __name__ == "__main__":
    main()
