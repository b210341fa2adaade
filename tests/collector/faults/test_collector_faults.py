"""`tracefact collector` through queue faults, as users run it (subprocesses, real stores).

Each test ends with the collector's accounting whole: every span answered 200 reached the
upstream, every refusal was a 503 counted as `unavailable`, no request went unanswered,
and the collector is ready again once the fault cleared (its loops restarted if they had
to, never stalled).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import redis

from tests.collector.harness import TRACEFACT, base_config, running_collector, wait_until
from tests.collector.queues import processes
from tests.collector.queues.processes import CollectorProcess, arrivals, trace_requests
from tests.collector.queues.redis_server import RedisServer
from tests.fakes.otlp import OTLPReceiver
from tracefact import semconv

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}


def post_all(process: CollectorProcess, traces: range) -> dict[int, int]:
    """Each trace's request posted at once (eight clients); its status by trace."""

    def post(trace: int) -> int:
        (request,) = trace_requests(trace, together=True)
        response = httpx.post(
            f"{process.http}/v1/traces",
            content=request.SerializeToString(),
            headers=PROTOBUF,
            timeout=30,
        )
        return response.status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return dict(zip(traces, pool.map(post, traces), strict=True))


def rejected(process: CollectorProcess, reason: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{process.ports['metrics']}/metrics").text
    name = semconv.METRIC_COLLECTOR_REJECTED.replace(".", "_")
    return sum(
        float(value)
        for labels, value in re.findall(rf"^{name}_total{{([^}}]*)}} ([0-9.e+]+)$", text, re.M)
        if f'reason="{reason}"' in labels
    )


def ready(process: CollectorProcess) -> httpx.Response:
    return httpx.get(f"{process.http}/readyz")


def assert_accounted(
    process: CollectorProcess, upstream: OTLPReceiver, answers: dict[int, int]
) -> None:
    """Every answer 200 or 503; the 503s counted; every 200's spans delivered (at least once)."""
    assert set(answers.values()) <= {200, 503}, answers
    refused = sum(1 for status in answers.values() if status == 503)
    assert rejected(process, semconv.REJECT_UNAVAILABLE) == refused
    accepted = [t for t, status in answers.items() if status == 200]
    expected = processes.sent_ids(range(0))  # empty set, typed
    for trace in accepted:
        expected |= processes.sent_ids(range(trace, trace + 1))
    assert wait_until(lambda: expected <= set(arrivals(upstream)), 60), len(
        expected - set(arrivals(upstream))
    )
    assert wait_until(
        lambda: processes.gauge(process, semconv.METRIC_COLLECTOR_QUEUE_DEPTH) == 0, 60
    )


def start_collector(
    tmp_path: Path, upstream: OTLPReceiver, started: list[CollectorProcess], **queue: object
) -> CollectorProcess:
    settings = processes.config(upstream.endpoint, 0.0, window_seconds=0.1, **queue)
    process = processes.start("collector", tmp_path / "collector.yaml", settings)
    started.append(process)
    return process


# --- SQLite ------------------------------------------------------------------------------


LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("ROLLBACK")
"""


def test_sqlite_locked_by_another_process(
    tmp_path: Path, upstream: OTLPReceiver, started: list[CollectorProcess]
) -> None:
    collector = start_collector(tmp_path, upstream, started, **processes.sqlite_keys(tmp_path))
    answers = post_all(collector, range(1, 11))
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(tmp_path / "queue.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert locker.stdout is not None and locker.stdin is not None
    assert locker.stdout.readline() == "locked\n"
    answers |= post_all(collector, range(11, 31))  # the file's write lock is held meanwhile
    assert 503 in answers.values()
    assert "database is locked" in ready(collector).json()["reason"]
    locker.stdin.write("\n")
    locker.stdin.close()
    locker.wait(10)
    locker.stdout.close()
    assert wait_until(lambda: ready(collector).status_code == 200)
    after = post_all(collector, range(31, 41))
    assert set(after.values()) == {200}
    assert_accounted(collector, upstream, answers | after)


@contextlib.contextmanager
def small_disk(path: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of `size` at `path`, or a skip where this machine cannot mount one."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr!r}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_sqlite_on_a_full_disk(
    tmp_path: Path, upstream: OTLPReceiver, started: list[CollectorProcess]
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        collector = start_collector(tmp_path, upstream, started, **processes.sqlite_keys(disk))
        answers = post_all(collector, range(1, 11))
        filler = disk / "filler"
        with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * 4096)
        answers |= post_all(collector, range(11, 61))
        assert 503 in answers.values()
        filler.unlink()
        assert wait_until(lambda: ready(collector).status_code == 200)
        after = post_all(collector, range(61, 71))
        assert set(after.values()) == {200}
        assert_accounted(collector, upstream, answers | after)
        processes.stop([collector])


def test_a_queue_file_that_is_not_a_queue_is_one_line_and_exit_2(tmp_path: Path) -> None:
    queue = tmp_path / "queue.db"
    queue.write_bytes(os.urandom(64 * 1024))
    settings = processes.config("http://127.0.0.1:9", 0.0, **processes.sqlite_keys(tmp_path))
    processes.write_config(tmp_path / "collector.yaml", settings)
    done = subprocess.run(
        [str(TRACEFACT), "collector", "--config", str(tmp_path / "collector.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=processes.ROOT,
        env={**os.environ, "PYTHONPATH": str(processes.ROOT)},
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"tracefact collector: queue file {queue} is not a tracefact queue: file is not a database"
    ]


def test_a_queue_file_overwritten_while_running_is_reported_and_the_collector_exits_1(
    tmp_path: Path, upstream: OTLPReceiver, started: list[CollectorProcess]
) -> None:
    """SQLite's page cache and WAL would serve every read: the file itself is looked at."""
    collector = start_collector(tmp_path, upstream, started, **processes.sqlite_keys(tmp_path))
    answers = post_all(collector, range(1, 11))
    assert set(answers.values()) == {200}
    queue = tmp_path / "queue.db"
    queue.write_bytes(os.urandom(queue.stat().st_size))

    def failed() -> bool:
        post_all(collector, range(11, 12))  # puts look too, not only the engine's gets
        response = ready(collector)
        return response.status_code == 503 and "damaged" in response.json()["reason"]

    assert wait_until(failed, 30)
    assert collector.process.wait(60) == 1
    assert any("damaged" in line for line in collector.lines)


# --- Redis -------------------------------------------------------------------------------

Refusal = tuple[Callable[[redis.Redis], object], Callable[[redis.Redis], object]]
REFUSALS: dict[str, Refusal] = {
    # READONLY: a replica of a master that is not there refuses every write, reads too
    # through a consumer group (XREADGROUP and XACK write).
    "readonly": (lambda r: r.replicaof("127.0.0.1", 9), lambda r: r.replicaof("NO", "ONE")),
    # OOM: over maxmemory, commands that may grow the data are refused.
    "oom": (lambda r: r.config_set("maxmemory", 1), lambda r: r.config_set("maxmemory", 0)),
}


@pytest.mark.parametrize("refusal", list(REFUSALS))
def test_redis_refusing_writes(
    tmp_path: Path,
    upstream: OTLPReceiver,
    redis_server: RedisServer,
    started: list[CollectorProcess],
    refusal: str,
) -> None:
    refuse, allow = REFUSALS[refusal]
    collector = start_collector(
        tmp_path, upstream, started, **processes.redis_keys(redis_server, lease_seconds=2)
    )
    client = redis.Redis.from_url(redis_server.url)
    answers = post_all(collector, range(1, 11))
    refuse(client)
    answers |= post_all(collector, range(11, 41))
    assert 503 in answers.values()
    assert "redis refused" in ready(collector).json()["reason"]
    allow(client)
    assert wait_until(lambda: ready(collector).status_code == 200)
    after = post_all(collector, range(41, 51))
    assert set(after.values()) == {200}
    assert_accounted(collector, upstream, answers | after)
    client.close()


# --- memory at the door ------------------------------------------------------------------


def _length_prefixed(field: int, payload: bytes) -> bytes:
    size, varint = len(payload), bytearray()
    while True:
        byte, size = size & 0x7F, size >> 7
        varint.append(byte | (0x80 if size else 0))
        if not size:
            return bytes([field << 3 | 2]) + bytes(varint) + payload


def _in_one_span(span: bytes) -> bytes:
    """ExportTraceServiceRequest > ResourceSpans (1) > ScopeSpans (2) > Span (2)."""
    return _length_prefixed(1, _length_prefixed(2, _length_prefixed(2, span)))


def _array_of(values: bytes) -> bytes:
    """One attribute (Span.attributes, 9) whose AnyValue.array_value (5) holds `values`."""
    return _length_prefixed(9, _length_prefixed(2, _length_prefixed(5, values)))


# Requests of about 8 MiB of two-byte items (an item's tag and a zero length), each 50 to
# 175 bytes decoded: the wire walk counts them before anything is built. By name: the
# items' tag and what holds them.
ADVERSARIAL: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
    "empty-spans": (0x12, lambda spans: _length_prefixed(1, _length_prefixed(2, spans))),
    "empty-attributes": (0x4A, _in_one_span),  # Span.attributes (9)
    "empty-events": (0x5A, _in_one_span),  # Span.events (11)
    "empty-links": (0x6A, _in_one_span),  # Span.links (13)
    "array-of-empty-values": (0x0A, lambda values: _in_one_span(_array_of(values))),
}


def adversarial(name: str, body_bytes: int) -> tuple[bytes, int]:
    """The request `name` about `body_bytes` long, and how many items it carries."""
    tag, holder = ADVERSARIAL[name]
    count = (body_bytes - 64) // 2
    return holder(bytes([tag, 0]) * count), count


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


@pytest.mark.parametrize("body_name", list(ADVERSARIAL))
def test_peak_memory_under_concurrent_maximum_size_requests_is_bounded(
    tmp_path: Path, upstream: OTLPReceiver, started: list[CollectorProcess], body_name: str
) -> None:
    """Four clients at once, each with 8 MiB of four million empty spans, attributes, ...

    Counted on the wire, building nothing: what is read at once (the bodies within
    `max_bytes_in_flight`) and a copy of each at most. Decoded first, one request cost
    213 MiB (array values) to 377 MiB (links), 700 MiB of empty spans.
    """
    body, count = adversarial(body_name, MAX_BODY)
    assert len(body) <= MAX_BODY and count > 4_000_000
    four_at_once_stay_bounded(tmp_path, upstream, started, body, PROTOBUF)


# OTLP/JSON bodies of about 8 MiB whose parse costs Python 25 to 35 times the body, by
# name: empty attributes (which the OTLP count would refuse, but only once parsed), arrays
# of empty arrays under a field OTLP does not know (ignored, so never counted), and
# one-key objects whose keys all differ.
ADVERSARIAL_JSON: dict[str, Callable[[int], bytes]] = {
    "empty-attributes": lambda n: _json_span(b'"attributes":[' + b",".join([b"{}"] * n) + b"]"),
    "unknown-field-of-arrays": lambda n: _json_span(b'"x":[' + b",".join([b"[[]]"] * n) + b"]"),
    "objects-with-distinct-keys": lambda n: _json_span(
        b'"x":[' + b",".join(b'{"%06x":1}' % i for i in range(n)) + b"]"
    ),
}


def _json_span(fields: bytes) -> bytes:
    return b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x",' + fields + b"}]}]}]}"


def adversarial_json(name: str, body_bytes: int) -> bytes:
    """The JSON body `name`, as many of its values as fit in `body_bytes`."""
    make = ADVERSARIAL_JSON[name]
    unit = len(make(2)) - len(make(1))
    return make((body_bytes - 256) // unit)


@pytest.mark.parametrize("body_name", list(ADVERSARIAL_JSON))
def test_peak_memory_under_concurrent_maximum_size_json_requests_is_bounded(
    tmp_path: Path, upstream: OTLPReceiver, started: list[CollectorProcess], body_name: str
) -> None:
    """Four clients at once, each with 8 MiB of OTLP/JSON that parses to millions of objects.

    Its values counted in the raw bytes, its parse's cost charged to the bytes in flight
    before it runs. Parsed first, one request cost 200 MiB, three at once 617 MiB.
    """
    body = adversarial_json(body_name, MAX_BODY)
    assert MAX_BODY - 512 <= len(body) <= MAX_BODY
    four_at_once_stay_bounded(tmp_path, upstream, started, body, JSON)


MAX_BODY = 8 * 1024 * 1024


def four_at_once_stay_bounded(
    tmp_path: Path,
    upstream: OTLPReceiver,
    started: list[CollectorProcess],
    body: bytes,
    headers: dict[str, str],
) -> None:
    """`body` posted by four clients at once: refused and counted, RSS within twice the budget."""
    in_flight = 3 * MAX_BODY
    settings = processes.config(upstream.endpoint, 0.0)
    settings["limits"] = {"max_body_bytes": MAX_BODY, "max_bytes_in_flight": in_flight}
    collector = processes.start("collector", tmp_path / "collector.yaml", settings)
    started.append(collector)
    post_all(collector, range(1, 3))  # warmed up: the baseline includes serving
    baseline = peak_rss_mib(collector.process.pid)

    def post(_: int) -> int:
        return httpx.post(
            f"{collector.http}/v1/traces", content=body, headers=headers, timeout=60
        ).status_code

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(post, range(4)))
    assert set(statuses) <= {413, 429} and 413 in statuses, statuses
    growth = peak_rss_mib(collector.process.pid) - baseline
    assert growth < 2 * in_flight / 2**20, growth
    assert rejected(collector, semconv.REJECT_TOO_LARGE) == statuses.count(413)


def ordinary_json_export(spans: int) -> bytes:
    """OTLP/JSON as the OpenTelemetry JS exporter sends it: HTTP server spans, hex ids."""

    def span(index: int) -> dict[str, Any]:
        attributes = {
            "http.method": "GET",
            "http.url": f"https://shop.example.com/api/items/{index}?page=2",
            "http.target": f"/api/items/{index}?page=2",
            "http.host": "shop.example.com",
            "http.scheme": "https",
            "http.user_agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0",
            "http.flavor": "1.1",
            "net.host.port": 443,
            "http.status_code": 200,
            "http.route": "/api/items/:id",
        }
        return {
            "traceId": f"{index:032x}",
            "spanId": f"{index + 1:016x}",
            "parentSpanId": f"{index + 2:016x}",
            "name": "GET /api/items/:id",
            "kind": 2,
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000012345678",
            "attributes": [
                {"key": key, "value": {"intValue": value}}
                if isinstance(value, int)
                else {"key": key, "value": {"stringValue": value}}
                for key, value in attributes.items()
            ],
            "droppedAttributesCount": 0,
            "events": [{"timeUnixNano": "1700000000001000000", "name": "request.read"}],
            "droppedEventsCount": 0,
            "status": {"code": 0},
            "links": [],
            "droppedLinksCount": 0,
        }

    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "shop"}}]}
    scope = {"name": "@opentelemetry/instrumentation-http", "version": "0.45.1"}
    document = {
        "resourceSpans": [
            {
                "resource": resource,
                "scopeSpans": [{"scope": scope, "spans": [span(i) for i in range(spans)]}],
            }
        ]
    }
    return json.dumps(document).encode()


def test_an_ordinary_json_export_of_thousands_of_spans_is_accepted_at_the_defaults(
    tmp_path: Path, upstream: OTLPReceiver, started: list[CollectorProcess]
) -> None:
    """4,000 HTTP spans with ordinary attributes (about 4 MB) pass the JSON parse's charge."""
    collector = processes.start(
        "collector", tmp_path / "collector.yaml", processes.config(upstream.endpoint, 0.0)
    )
    started.append(collector)
    body = ordinary_json_export(4_000)
    response = httpx.post(f"{collector.http}/v1/traces", content=body, headers=JSON, timeout=60)
    assert response.status_code == 200, response.text
    assert upstream.wait_for(4_000, timeout=60)
    assert len(arrivals(upstream)) == 4_000
    assert rejected(collector, semconv.REJECT_TOO_LARGE) == 0


def test_a_grpc_message_far_over_the_limit_is_refused_unread_and_counted(tmp_path: Path) -> None:
    """256 MiB to a collector whose limit is 8: refused by its declared length, not read."""
    max_body = 8 * 1024 * 1024
    settings = base_config("http://127.0.0.1:9/v1/traces", enabled=False)
    settings["limits"] = {"max_body_bytes": max_body}
    with running_collector(tmp_path / "collector.yaml", settings) as collector:
        baseline = peak_rss_mib(collector.process.pid)
        options = [("grpc.max_send_message_length", -1)]
        with grpc.insecure_channel(collector.grpc, options=options) as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=lambda b: b,
                response_deserializer=lambda b: b,
            )
            with pytest.raises(grpc.RpcError) as refused:
                export(b"\x00" * (32 * max_body), timeout=60)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        growth = peak_rss_mib(collector.process.pid) - baseline
        assert growth < 4 * max_body / 2**20, growth
        name = semconv.METRIC_COLLECTOR_REJECTED.replace(".", "_")

        def counted() -> bool:
            text = httpx.get(f"{collector.http}/metrics").text
            return any(
                line.startswith(f"{name}_total{{")
                and 'protocol="grpc"' in line
                and 'reason="too_large"' in line
                and line.endswith(" 1.0")
                for line in text.splitlines()
            )

        assert wait_until(counted)
